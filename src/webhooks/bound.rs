//! The outbox's bounds (docs/webhooks.md "Bounds"): a cap on the events waiting for the whole
//! deployment (`--webhook-max-pending`), dead letters dropped after `--webhook-dead-retention`,
//! and the `fairyring_webhook_outbox{reason="pending"|"dead"}` gauge.
//!
//! Over the cap, each room's oldest waiting `room.updated` events (never attempted, unclaimed)
//! are merged into one that covers their whole range of sequence numbers and names all their
//! actors: a receiver learns that the room changed from `fromSeq` to `toSeq` and reads what
//! happened in between from history. Should the outbox still be over the cap (many rooms, or
//! other events), the oldest never-attempted events are dropped and counted
//! (`fairyring_webhook_deliveries_total{reason="over_cap"}`). An event a node has claimed or
//! attempted is never merged nor dropped: a receiver may have seen its id.
//!
//! Owns the planning of merges ([`merges`]) and one pass of upkeep ([`upkeep`]), which the
//! delivery task runs every few seconds. Touches the store through the
//! [`crate::store::outbox::Outbox`] trait only; never rooms or HTTP.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::events::{ActorRef, Event, EventData};
use crate::store::outbox::OutboxEvent;
use crate::store::{Store, StoreError, now_millis};

/// What one pass of [`upkeep`] found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Upkept {
    /// Events waiting afterwards.
    pub pending: u64,
    /// Dead letters kept afterwards.
    pub dead: u64,
    /// Events merged away (each merge of `n` events removes `n - 1`).
    pub merged: u64,
    /// Events dropped over the cap.
    pub dropped: u64,
    /// Dead letters pruned.
    pub pruned: u64,
}

/// For the never-attempted events `fresh` (oldest first), each room's `room.updated` events
/// when it has two or more, and the one event that replaces them: a fresh id, the room, the
/// newest's time, the lowest `fromSeq` and highest `toSeq`, every actor once (at most
/// [`super::MAX_ACTORS`]); created when the oldest was, so it keeps that one's place.
pub fn merges(fresh: &[OutboxEvent]) -> Vec<(Vec<String>, OutboxEvent)> {
    let mut by_room: BTreeMap<String, Vec<(&OutboxEvent, Event)>> = BTreeMap::new();
    for row in fresh {
        let Ok(event) = serde_json::from_slice::<Event>(&row.body) else {
            continue;
        };
        if matches!(event.data, EventData::RoomUpdated { .. }) {
            by_room
                .entry(event.room.clone())
                .or_default()
                .push((row, event));
        }
    }
    let mut out = Vec::new();
    for (room, events) in by_room {
        if events.len() < 2 {
            continue;
        }
        let mut from = u64::MAX;
        let mut to = 0;
        let mut at = 0;
        let mut created_at = u64::MAX;
        let mut actors: Vec<ActorRef> = Vec::new();
        let mut ids = Vec::with_capacity(events.len());
        for (row, event) in &events {
            if let EventData::RoomUpdated {
                from_seq,
                to_seq,
                actors: theirs,
            } = &event.data
            {
                from = from.min(*from_seq);
                to = to.max(*to_seq);
                for actor in theirs {
                    if !actors.contains(actor) && actors.len() < super::MAX_ACTORS {
                        actors.push(actor.clone());
                    }
                }
            }
            at = at.max(event.at);
            created_at = created_at.min(row.created_at);
            ids.push(row.id.clone());
        }
        let merged = Event::new(
            &room,
            at,
            EventData::RoomUpdated {
                from_seq: from,
                to_seq: to,
                actors,
            },
        );
        let Ok(body) = serde_json::to_vec(&merged) else {
            continue;
        };
        out.push((
            ids,
            OutboxEvent {
                id: merged.id,
                body: Bytes::from(body),
                created_at,
            },
        ));
    }
    out
}

/// One pass: prunes dead letters older than `dead_retention`, brings the waiting events
/// within `max_pending` (merges, then drops), and sets the gauge.
pub async fn upkeep(
    store: &Arc<dyn Store>,
    max_pending: u64,
    dead_retention: Option<Duration>,
) -> Result<Upkept, StoreError> {
    let outbox = store.outbox();
    let now = now_millis();
    let mut done = Upkept::default();
    if let Some(keep) = dead_retention {
        let keep_ms = u64::try_from(keep.as_millis()).unwrap_or(u64::MAX);
        done.pruned = outbox.prune_dead(now.saturating_sub(keep_ms)).await?;
    }
    let mut pending = outbox.pending().await?;
    if pending > max_pending {
        // Only as many as are over the cap need to go; reading a few times that finds them.
        let over = pending - max_pending;
        let look = usize::try_from(pending).unwrap_or(usize::MAX);
        let fresh = outbox.fresh(now, look).await?;
        for (ids, merged) in merges(&fresh) {
            if pending <= max_pending {
                break;
            }
            let gone = ids.len() as u64 - 1;
            if outbox.replace(now, &ids, Some(merged)).await? {
                pending -= gone;
                done.merged += gone;
            }
        }
        if pending > max_pending {
            let fresh = outbox
                .fresh(now, usize::try_from(over).unwrap_or(usize::MAX))
                .await?;
            for event in fresh {
                if pending <= max_pending {
                    break;
                }
                if outbox
                    .replace(now, std::slice::from_ref(&event.id), None)
                    .await?
                {
                    pending -= 1;
                    done.dropped += 1;
                }
            }
        }
        if done.merged > 0 || done.dropped > 0 {
            tracing::warn!(
                merged = done.merged,
                dropped = done.dropped,
                max_pending,
                "webhook outbox over --webhook-max-pending"
            );
            let metrics = crate::metrics::global();
            crate::metrics::Metrics::count(&metrics.webhook_deliveries, "over_cap", done.dropped);
        }
    }
    done.pending = outbox.pending().await?;
    done.dead = outbox.dead_count().await?;
    let metrics = crate::metrics::global();
    let gauge = |state: &str, value: u64| {
        metrics
            .webhook_outbox
            .get_or_create(&crate::metrics::ReasonLabel {
                reason: state.to_owned(),
            })
            .set(i64::try_from(value).unwrap_or(i64::MAX));
    };
    gauge("pending", done.pending);
    gauge("dead", done.dead);
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    fn updated(room: &str, from: u64, to: u64, who: &str, created_at: u64) -> OutboxEvent {
        let event = Event::new(
            room,
            created_at,
            EventData::RoomUpdated {
                from_seq: from,
                to_seq: to,
                actors: vec![ActorRef {
                    kind: "user".into(),
                    id: who.into(),
                }],
            },
        );
        OutboxEvent {
            id: event.id.clone(),
            body: Bytes::from(serde_json::to_vec(&event).unwrap()),
            created_at,
        }
    }

    #[test]
    fn a_rooms_updates_merge_into_one_covering_their_range() {
        let fresh = vec![
            updated("a", 1, 3, "ada", 10),
            updated("b", 1, 1, "bob", 11),
            updated("a", 4, 9, "bob", 12),
            updated("a", 10, 12, "ada", 13),
        ];
        let planned = merges(&fresh);
        assert_eq!(planned.len(), 1, "b has one event: nothing to merge");
        let (ids, merged) = &planned[0];
        assert_eq!(
            ids,
            &vec![
                fresh[0].id.clone(),
                fresh[2].id.clone(),
                fresh[3].id.clone()
            ]
        );
        assert_eq!(merged.created_at, 10);
        let event: Event = serde_json::from_slice(&merged.body).unwrap();
        assert_eq!(event.room, "a");
        assert_eq!(event.at, 13);
        match event.data {
            EventData::RoomUpdated {
                from_seq,
                to_seq,
                actors,
            } => {
                assert_eq!((from_seq, to_seq), (1, 12));
                let names: Vec<&str> = actors.iter().map(|a| a.id.as_str()).collect();
                assert_eq!(names, vec!["ada", "bob"]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn the_outbox_is_kept_within_its_cap_and_dead_letters_expire() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let outbox = store.outbox();
        let now = now_millis();
        // 40 rooms, 8 updates each, never delivered (a receiver that hangs): 320 events.
        for i in 0..8u64 {
            for room in 0..40 {
                outbox
                    .push(updated(
                        &format!("r{room}"),
                        i * 10 + 1,
                        i * 10 + 10,
                        "ada",
                        now - 1_000 + i,
                    ))
                    .await
                    .unwrap();
            }
        }
        // An old dead letter.
        outbox.push(updated("dead", 1, 1, "ada", 1)).await.unwrap();
        outbox
            .dead(&outbox.fresh(now, 1).await.unwrap()[0].id, 10, 5, "refused")
            .await
            .unwrap();
        assert_eq!(outbox.pending().await.unwrap(), 320);
        let done = upkeep(&store, 100, Some(Duration::from_secs(3600)))
            .await
            .unwrap();
        assert_eq!(done.pruned, 1);
        assert_eq!(done.dead, 0);
        assert!(done.pending <= 100, "{done:?}");
        assert_eq!(done.dropped, 0, "merging was enough: {done:?}");
        // Every room is still reported, over its whole range.
        let left = outbox.fresh(now, 1_000).await.unwrap();
        let mut covered: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for row in &left {
            let event: Event = serde_json::from_slice(&row.body).unwrap();
            if let EventData::RoomUpdated {
                from_seq, to_seq, ..
            } = event.data
            {
                let span = covered.entry(event.room).or_insert((u64::MAX, 0));
                span.0 = span.0.min(from_seq);
                span.1 = span.1.max(to_seq);
            }
        }
        assert_eq!(covered.len(), 40);
        assert!(covered.values().all(|span| *span == (1, 80)), "{covered:?}");
        // A cap below the number of rooms drops the oldest.
        let done = upkeep(&store, 10, None).await.unwrap();
        assert_eq!(done.pending, 10);
        assert_eq!(done.dropped, 30);
    }
}
