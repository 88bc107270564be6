//! What the store keeps for history besides the log (docs/storage.md "History"): checkpoints
//! as a chain of deltas, and how a version is assembled from them and the log. Shared by every
//! backend; owns no storage and touches no database (the backends read the rows, this file
//! decides what they mean).
//!
//! A checkpoint is the room's state just after update `seq`, kept as a v1 update: either a
//! full state (`base` = `None`) or a delta on top of the checkpoint at `base` (everything the
//! document gained since that checkpoint's state vector, with the whole delete set). The deltas
//! of a chain add up to about one encoded document, where full checkpoints every N updates
//! would each hold the whole document (tombstones included) and grow with the history.

use bytes::Bytes;

/// What a version starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionBase {
    /// The empty document (the log is kept from its first update).
    Empty,
    /// The room's snapshot at this sequence number (no usable checkpoint chain below the
    /// version).
    Snapshot(u64),
    /// The checkpoint at this sequence number, with its chain.
    Checkpoint(u64),
}

impl VersionBase {
    /// The sequence number the base's state is just after (0 for the empty document).
    pub fn seq(self) -> u64 {
        match self {
            VersionBase::Empty => 0,
            VersionBase::Snapshot(seq) | VersionBase::Checkpoint(seq) => seq,
        }
    }
}

/// A room as it was just after update `seq`: apply `states` then `updates`, in order.
#[derive(Debug, Clone)]
pub struct StoredVersion {
    /// Where it starts.
    pub base: VersionBase,
    /// The base's v1 updates, oldest first: the snapshot, or the checkpoint chain (a full
    /// state, then each delta up to the base checkpoint); empty for [`VersionBase::Empty`].
    pub states: Vec<Bytes>,
    /// The logged updates after the base up to `seq`, oldest first.
    pub updates: Vec<Bytes>,
    /// The version's sequence number.
    pub seq: u64,
}

impl StoredVersion {
    /// Everything to apply, in order.
    pub fn all(&self) -> impl Iterator<Item = &[u8]> {
        self.states
            .iter()
            .chain(self.updates.iter())
            .map(|b| b.as_ref())
    }
}

/// A checkpoint to keep.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// The update it is the state after.
    pub seq: u64,
    /// `None`: a full state; else a delta on top of the checkpoint at this sequence number.
    pub base: Option<u64>,
    /// The v1 update.
    pub data: Bytes,
    /// The sequence number of the state it extends (its `base`, or the snapshot or empty
    /// document a full one was built from): it is kept only while no checkpoint newer than
    /// that exists, so that concurrent builders (several nodes) never fork a chain.
    pub extends: u64,
}

/// The chain ending at checkpoint `head` among a room's checkpoints `(seq, base)` (any order):
/// the sequence numbers from a full checkpoint up to `head`, oldest first; `None` when `head`
/// or one of its bases is missing. Bases always lie below their checkpoint (anything else is
/// never followed).
pub fn chain_to(meta: &[(u64, Option<u64>)], head: u64) -> Option<Vec<u64>> {
    let by_seq: std::collections::HashMap<u64, Option<u64>> = meta.iter().copied().collect();
    let mut chain = vec![head];
    let mut at = head;
    loop {
        match by_seq.get(&at)? {
            None => break,
            Some(base) if *base < at => {
                chain.push(*base);
                at = *base;
            }
            Some(_) => return None,
        }
    }
    chain.reverse();
    Some(chain)
}

/// The newest usable chain among a room's checkpoints `(seq, base)` (any order), as
/// [`chain_to`] gives it; empty when there is none. A chain whose base was pruned away (a
/// branch left by a concurrent builder) is skipped for the next newest.
pub fn newest_chain(meta: &[(u64, Option<u64>)]) -> Vec<u64> {
    let mut heads: Vec<u64> = meta.iter().map(|(seq, _)| *seq).collect();
    heads.sort_unstable_by(|a, b| b.cmp(a));
    heads
        .into_iter()
        .find_map(|head| chain_to(meta, head))
        .unwrap_or_default()
}

/// The chain pruning keeps in a room (see [`super::Store::prune_history`]), as [`chain_to`] gives
/// it: up to the newest checkpoint at or below both `old` (the room's last update older than the
/// cut) and `snapshot` (a room loads from its snapshot and the updates after it: none of those
/// may go). Its last element is the checkpoint kept; `None`: nothing can be dropped (no old
/// update, no snapshot, no such checkpoint, or its chain is broken).
pub fn prune_chain(
    meta: &[(u64, Option<u64>)],
    old: Option<u64>,
    snapshot: Option<u64>,
) -> Option<Vec<u64>> {
    let limit = old?.min(snapshot?);
    let keep = meta
        .iter()
        .map(|(seq, _)| *seq)
        .filter(|seq| *seq <= limit)
        .max()?;
    chain_to(meta, keep)
}

/// Assembles the version at `seq` from what a backend read in one transaction: the chain's
/// states (`chain`: the checkpoint head's sequence number and the chain's data, oldest first;
/// `None` when no chain lies at or below `seq`), the snapshot (if at or below `seq`), and the
/// logged updates `rows` from the lowest candidate base up to `seq`, oldest first. Prefers the
/// checkpoint chain, then the empty document (a log kept from update 1), then the snapshot;
/// `None` when none of them has every update up to `seq`.
pub fn assemble_version(
    seq: u64,
    chain: Option<(u64, Vec<Bytes>)>,
    snapshot: Option<(u64, Bytes)>,
    rows: Vec<(u64, Bytes)>,
) -> Option<StoredVersion> {
    if seq == 0 {
        return None;
    }
    // The rows after `from`, if they are exactly `from + 1 ..= seq`.
    let after = |from: u64| -> Option<Vec<Bytes>> {
        let start = rows.partition_point(|(s, _)| *s <= from);
        let end = rows.partition_point(|(s, _)| *s <= seq).max(start);
        let tail = &rows[start..end];
        let consecutive = tail
            .iter()
            .enumerate()
            .all(|(i, (s, _))| *s == from + 1 + i as u64);
        (from <= seq && consecutive && tail.len() as u64 == seq - from)
            .then(|| tail.iter().map(|(_, u)| u.clone()).collect())
    };
    let mut candidates: Vec<(VersionBase, Vec<Bytes>)> = Vec::with_capacity(3);
    if let Some((head, states)) = chain {
        candidates.push((VersionBase::Checkpoint(head), states));
    }
    candidates.push((VersionBase::Empty, Vec::new()));
    if let Some((at, state)) = snapshot {
        candidates.push((VersionBase::Snapshot(at), vec![state]));
    }
    candidates.into_iter().find_map(|(base, states)| {
        after(base.seq()).map(|updates| StoredVersion {
            base,
            states,
            updates,
            seq,
        })
    })
}

/// Where the version at `seq` starts when its updates are read afterwards, in bounded
/// batches ([`super::Store::version_base`]): among the checkpoint chain (its head and states),
/// the snapshot and the empty document, those whose updates up to `seq` are all kept (the log is
/// pruned only from its start, so a base is usable when `seq` is the base itself or the oldest
/// kept update `first_kept` follows it), the one nearest `seq` (fewest updates to replay; the
/// checkpoint on a tie);
/// `None` when none is usable or `seq` is 0. The version's `updates` are left empty.
pub fn choose_base(
    seq: u64,
    chain: Option<(u64, Vec<Bytes>)>,
    snapshot: Option<(u64, Bytes)>,
    first_kept: Option<u64>,
) -> Option<StoredVersion> {
    if seq == 0 {
        return None;
    }
    let usable =
        |base: u64| base <= seq && (base == seq || first_kept.is_some_and(|f| f <= base + 1));
    // In rising preference on a tie (`max_by_key` keeps the last): the empty document, the
    // snapshot, the checkpoint chain.
    let mut candidates: Vec<(VersionBase, Vec<Bytes>)> = Vec::with_capacity(3);
    candidates.push((VersionBase::Empty, Vec::new()));
    if let Some((at, state)) = snapshot {
        candidates.push((VersionBase::Snapshot(at), vec![state]));
    }
    if let Some((head, states)) = chain {
        candidates.push((VersionBase::Checkpoint(head), states));
    }
    candidates
        .into_iter()
        .filter(|(base, _)| usable(base.seq()))
        .max_by_key(|(base, _)| base.seq())
        .map(|(base, states)| StoredVersion {
            base,
            states,
            updates: Vec::new(),
            seq,
        })
}

/// One full-state v1 update equal to applying `states` in order (a chain made full again when
/// pruning drops what lies below it); `None` when they cannot be merged (never for states
/// this server wrote). CPU work: call it off the async threads.
pub fn squash(states: &[Bytes]) -> Option<Bytes> {
    let parts: Vec<&[u8]> = states.iter().map(|b| b.as_ref()).collect();
    crate::contain::contain(|| yrs::merge_updates_v1(&parts))
        .ok()?
        .ok()
        .map(Bytes::from)
}

/// [`squash`] on a blocking thread (the SQL stores' pruning runs on the async threads).
pub async fn squash_off_thread(states: Vec<Bytes>) -> Option<Bytes> {
    tokio::task::spawn_blocking(move || squash(&states))
        .await
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::from(s.to_owned())
    }

    #[test]
    fn the_newest_chain_runs_from_a_full_checkpoint_and_skips_broken_branches() {
        assert!(newest_chain(&[]).is_empty());
        assert_eq!(newest_chain(&[(10, None)]), vec![10]);
        assert_eq!(
            newest_chain(&[(30, Some(20)), (10, None), (20, Some(10))]),
            vec![10, 20, 30]
        );
        // 40's base was pruned away: the chain ending at 30 is the newest usable one.
        assert_eq!(
            newest_chain(&[(10, None), (20, Some(10)), (30, Some(20)), (40, Some(25))]),
            vec![10, 20, 30]
        );
        // A base that does not lie below its checkpoint is never followed (no loops).
        assert!(newest_chain(&[(10, Some(10))]).is_empty());
        assert!(newest_chain(&[(10, Some(20)), (20, Some(10))]).is_empty());
        // A newer full checkpoint starts a chain of its own.
        assert_eq!(
            newest_chain(&[(10, None), (20, Some(10)), (30, None)]),
            vec![30]
        );
    }

    #[test]
    fn pruning_keeps_the_chain_below_both_the_cut_and_the_snapshot() {
        let meta = [(10, None), (20, Some(10)), (30, Some(20))];
        assert_eq!(prune_chain(&meta, Some(25), Some(40)), Some(vec![10, 20]));
        // Never past the snapshot: a load needs every update after it.
        assert_eq!(prune_chain(&meta, Some(35), Some(15)), Some(vec![10]));
        // Nothing old, no snapshot, or nothing at or below them: nothing goes.
        assert_eq!(prune_chain(&meta, None, Some(40)), None);
        assert_eq!(prune_chain(&meta, Some(35), None), None);
        assert_eq!(prune_chain(&meta, Some(5), Some(40)), None);
        // A broken chain is not pruned to.
        assert_eq!(prune_chain(&[(20, Some(10))], Some(25), Some(40)), None);
    }

    #[test]
    fn a_base_read_alone_is_the_usable_one_nearest_the_version() {
        let chain = || Some((10, vec![b("full"), b("delta")]));
        let snapshot = |at: u64| Some((at, b("snap")));
        // The log kept whole: the chain is nearer than the empty document.
        let base = choose_base(15, chain(), None, Some(1)).unwrap();
        assert_eq!(
            (base.base, base.states.len()),
            (VersionBase::Checkpoint(10), 2)
        );
        assert!(base.updates.is_empty());
        // A newer snapshot is nearer; on a tie the chain.
        assert_eq!(
            choose_base(15, chain(), snapshot(12), Some(1))
                .unwrap()
                .base,
            VersionBase::Snapshot(12)
        );
        assert_eq!(
            choose_base(15, chain(), snapshot(10), Some(1))
                .unwrap()
                .base,
            VersionBase::Checkpoint(10)
        );
        // Pruned up to 12: only a base at 12 or above, or the version itself, is usable.
        assert!(choose_base(15, chain(), None, Some(13)).is_none());
        assert_eq!(
            choose_base(15, chain(), snapshot(12), Some(13))
                .unwrap()
                .base,
            VersionBase::Snapshot(12)
        );
        assert_eq!(
            choose_base(10, chain(), None, Some(13)).unwrap().base,
            VersionBase::Checkpoint(10)
        );
        assert!(choose_base(0, chain(), None, Some(1)).is_none());
        assert!(choose_base(5, None, None, None).is_none());
        assert_eq!(
            choose_base(5, None, None, Some(1)).unwrap().base,
            VersionBase::Empty
        );
    }

    #[test]
    fn a_version_prefers_the_chain_then_the_whole_log_then_the_snapshot() {
        let rows = |from: u64, to: u64| -> Vec<(u64, Bytes)> {
            (from..=to).map(|s| (s, b(&format!("u{s}")))).collect()
        };
        // Chain at 4, log complete from 1.
        let v = assemble_version(6, Some((4, vec![b("c2"), b("c4")])), None, rows(1, 6)).unwrap();
        assert_eq!(v.base, VersionBase::Checkpoint(4));
        assert_eq!(v.states, vec![b("c2"), b("c4")]);
        assert_eq!(v.updates, vec![b("u5"), b("u6")]);
        // No chain: the whole log from the empty document.
        let v = assemble_version(3, None, Some((2, b("s2"))), rows(1, 3)).unwrap();
        assert_eq!(v.base, VersionBase::Empty);
        assert_eq!(v.updates.len(), 3);
        // The log before the snapshot is gone (a room compacted before history): the snapshot.
        let v = assemble_version(5, None, Some((3, b("s3"))), rows(4, 5)).unwrap();
        assert_eq!(v.base, VersionBase::Snapshot(3));
        assert_eq!(v.states, vec![b("s3")]);
        assert_eq!(v.updates, vec![b("u4"), b("u5")]);
        // A version exactly at the chain's head needs no update.
        let v = assemble_version(4, Some((4, vec![b("c4")])), None, rows(5, 5)).unwrap();
        assert!(v.updates.is_empty());
        // Gaps, an unreached version and version 0 are not kept.
        let mut gappy = rows(1, 6);
        gappy.remove(4);
        assert!(assemble_version(6, None, None, gappy).is_none());
        assert!(assemble_version(7, None, None, rows(1, 6)).is_none());
        assert!(assemble_version(0, None, None, Vec::new()).is_none());
        // A snapshot above the version cannot serve it.
        assert!(assemble_version(2, None, Some((3, b("s3"))), rows(4, 5)).is_none());
    }

    #[test]
    fn squashing_a_chain_gives_the_same_document() {
        use yrs::types::ToJson;
        use yrs::updates::decoder::Decode;
        use yrs::{Map, ReadTxn, StateVector, Transact};
        let doc = yrs::Doc::with_client_id(7);
        let map = doc.get_or_insert_map("shapes");
        let mut states = Vec::new();
        let mut sv = StateVector::default();
        for round in 0..4 {
            {
                let mut txn = doc.transact_mut();
                map.insert(&mut txn, "x", round as f64);
                map.insert(&mut txn, format!("k{round}"), "v");
                if round == 2 {
                    map.remove(&mut txn, "k0");
                }
            }
            let txn = doc.transact();
            states.push(Bytes::from(txn.encode_diff_v1(&sv)));
            sv = txn.state_vector();
        }
        let full = squash(&states).unwrap();
        let rebuilt = yrs::Doc::new();
        rebuilt
            .transact_mut()
            .apply_update(yrs::Update::decode_v1(&full).unwrap())
            .unwrap();
        let rebuilt_map = rebuilt.get_or_insert_map("shapes");
        assert_eq!(
            rebuilt_map.to_json(&rebuilt.transact()),
            map.to_json(&doc.transact())
        );
    }
}
