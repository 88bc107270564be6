//! An in-memory [`Store`]: nothing survives the process. For tests and `--store memory:`.
//!
//! Owns the rooms' logs (with the fairies' fencing tokens) in maps; its keyed side tables are
//! [`super::keyed::memory::MemoryTables`] and its outbox [`super::outbox::memory`]. It must not
//! keep anything a SQL store would not (nothing of sockets, peers or documents).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;

use super::checkpoints::{assemble_version, choose_base, newest_chain, prune_chain, squash};
use super::keyed::memory::MemoryTables;
use super::keyed::{SideTables, Table};
use super::{Checkpoint, Fence, LogRow, Logged, Store, StoreError, StoredRoom, StoredVersion};
use crate::ids::RoomName;

/// A checkpoint chain: its head's sequence number and the data of each checkpoint in it.
type Chain = (u64, Vec<Bytes>);

#[derive(Default)]
struct Log {
    /// The snapshot and the sequence number it covers.
    snapshot: Option<(u64, Bytes)>,
    /// Every kept update, oldest first.
    updates: Vec<LogRow>,
    /// History checkpoints by sequence number: base (`None`: full) and data.
    checkpoints: BTreeMap<u64, (Option<u64>, Bytes)>,
    last_seq: u64,
    /// The newest fencing token of each fairy of the room (docs/scaling.md "Fencing").
    fences: HashMap<String, u64>,
}

impl Log {
    fn snapshot_seq(&self) -> u64 {
        self.snapshot.as_ref().map_or(0, |(seq, _)| *seq)
    }

    /// `(seq, base)` of the checkpoints at or below `upto`.
    fn checkpoint_meta(&self, upto: u64) -> Vec<(u64, Option<u64>)> {
        self.checkpoints
            .range(..=upto)
            .map(|(seq, (base, _))| (*seq, *base))
            .collect()
    }

    /// The data of the checkpoints `seqs`.
    fn checkpoint_data(&self, seqs: &[u64]) -> Vec<Bytes> {
        seqs.iter()
            .filter_map(|seq| self.checkpoints.get(seq).map(|(_, data)| data.clone()))
            .collect()
    }

    /// What version `seq` can be built on: the newest checkpoint chain at or below it (its head
    /// and the chain's data) and the snapshot if it covers no more than `seq`.
    fn bases_at(&self, seq: u64) -> (Option<Chain>, Option<(u64, Bytes)>) {
        let chain = newest_chain(&self.checkpoint_meta(seq));
        let chain = chain
            .last()
            .map(|head| (*head, self.checkpoint_data(&chain)));
        let snapshot = self.snapshot.clone().filter(|(s, _)| *s <= seq);
        (chain, snapshot)
    }

    /// The document as of `seq` ([`Store::load_version`]): its base and the rows after it.
    fn version(&self, seq: u64) -> Option<StoredVersion> {
        let (chain, snapshot) = self.bases_at(seq);
        let from = chain.as_ref().map_or(0, |(head, _)| *head);
        let rows = self
            .updates
            .iter()
            .filter(|row| row.seq > from && row.seq <= seq)
            .map(|row| (row.seq, row.update.clone()))
            .collect();
        assemble_version(seq, chain, snapshot, rows)
    }

    /// The base a version `seq` is built on ([`Store::version_base`]).
    fn version_base(&self, seq: u64) -> Option<StoredVersion> {
        let (chain, snapshot) = self.bases_at(seq);
        let first_kept = self.updates.first().map(|row| row.seq);
        choose_base(seq, chain, snapshot, first_kept)
    }
}

/// Keeps every room's log, the side tables and the outbox in memory.
#[derive(Default)]
pub struct MemoryStore {
    rooms: Mutex<HashMap<String, Log>>,
    tables: MemoryTables,
    outbox: super::outbox::memory::MemoryOutbox,
    /// `--dev`'s kept HS256 secret ([`Store::dev_secret`]): kept for the store's life.
    dev_secret: Mutex<Option<Vec<u8>>>,
}

impl MemoryStore {
    fn with<R>(&self, f: impl FnOnce(&mut HashMap<String, Log>) -> R) -> R {
        let mut guard = self.rooms.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn outbox(&self) -> &dyn super::outbox::Outbox {
        &self.outbox
    }

    fn side(&self) -> &dyn SideTables {
        self
    }

    async fn load(&self, room: &RoomName) -> Result<StoredRoom, StoreError> {
        Ok(self.with(|rooms| match rooms.get(room.as_str()) {
            None => StoredRoom::default(),
            Some(log) => {
                let from = log.snapshot_seq();
                StoredRoom {
                    snapshot: log.snapshot.as_ref().map(|(_, s)| s.clone()),
                    updates: log
                        .updates
                        .iter()
                        .filter(|row| row.seq > from)
                        .map(|row| row.update.clone())
                        .collect(),
                    last_seq: log.last_seq,
                }
            }
        }))
    }

    async fn append_logged(
        &self,
        room: &RoomName,
        updates: Vec<Logged>,
    ) -> Result<u64, StoreError> {
        self.append_fenced(room, updates, Vec::new()).await
    }

    async fn next_fence(&self, room: &RoomName, fairy: &str) -> Result<Option<u64>, StoreError> {
        Ok(Some(self.with(|rooms| {
            let log = rooms.entry(room.as_str().to_owned()).or_default();
            let generation = log.fences.entry(fairy.to_owned()).or_default();
            *generation += 1;
            *generation
        })))
    }

    async fn append_fenced(
        &self,
        room: &RoomName,
        updates: Vec<Logged>,
        fences: Vec<Fence>,
    ) -> Result<u64, StoreError> {
        self.with(|rooms| {
            let log = rooms.entry(room.as_str().to_owned()).or_default();
            if let Some(stale) = fences.iter().find(|f| {
                log.fences
                    .get(&f.fairy)
                    .is_some_and(|newest| *newest > f.generation)
            }) {
                return Err(StoreError::Fenced {
                    fairy: stale.fairy.clone(),
                });
            }
            for logged in updates {
                log.last_seq += 1;
                log.updates.push(LogRow {
                    seq: log.last_seq,
                    at: Some(logged.at),
                    actor: logged.actor,
                    update: logged.update,
                });
            }
            Ok(log.last_seq)
        })
    }

    async fn compact(
        &self,
        room: &RoomName,
        snapshot: Bytes,
        upto_seq: u64,
    ) -> Result<(), StoreError> {
        self.with(|rooms| {
            let log = rooms.entry(room.as_str().to_owned()).or_default();
            if log.snapshot_seq() <= upto_seq {
                log.snapshot = Some((upto_seq, snapshot));
            }
        });
        Ok(())
    }

    async fn newest_checkpoint(&self, room: &RoomName) -> Result<Option<u64>, StoreError> {
        Ok(self.with(|rooms| {
            rooms
                .get(room.as_str())
                .and_then(|log| log.checkpoints.keys().next_back().copied())
        }))
    }

    async fn add_checkpoint(
        &self,
        room: &RoomName,
        checkpoint: Checkpoint,
    ) -> Result<bool, StoreError> {
        Ok(self.with(|rooms| {
            let log = rooms.entry(room.as_str().to_owned()).or_default();
            let newest = log.checkpoints.keys().next_back().copied();
            if newest.is_some_and(|seq| seq > checkpoint.extends || seq >= checkpoint.seq) {
                return false;
            }
            log.checkpoints
                .insert(checkpoint.seq, (checkpoint.base, checkpoint.data));
            true
        }))
    }

    async fn history(
        &self,
        room: &RoomName,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LogRow>, StoreError> {
        Ok(self.with(|rooms| {
            rooms.get(room.as_str()).map_or_else(Vec::new, |log| {
                log.updates
                    .iter()
                    .filter(|row| row.seq > after)
                    .take(limit)
                    .cloned()
                    .collect()
            })
        }))
    }

    async fn load_version(
        &self,
        room: &RoomName,
        seq: u64,
    ) -> Result<Option<StoredVersion>, StoreError> {
        Ok(self.with(|rooms| rooms.get(room.as_str())?.version(seq)))
    }

    async fn dev_secret(&self, candidate: &[u8]) -> Result<Vec<u8>, StoreError> {
        let mut kept = self.dev_secret.lock().unwrap_or_else(|p| p.into_inner());
        Ok(kept.get_or_insert_with(|| candidate.to_vec()).clone())
    }

    async fn seq_at(&self, room: &RoomName, at: u64) -> Result<Option<u64>, StoreError> {
        Ok(self.with(|rooms| {
            rooms.get(room.as_str()).and_then(|log| {
                log.updates
                    .iter()
                    .filter(|row| row.at.is_some_and(|t| t <= at))
                    .map(|row| row.seq)
                    .next_back()
            })
        }))
    }

    async fn history_bounded(
        &self,
        room: &RoomName,
        after: u64,
        limit: usize,
        max_bytes: u64,
    ) -> Result<Vec<LogRow>, StoreError> {
        Ok(self.with(|rooms| {
            rooms.get(room.as_str()).map_or_else(Vec::new, |log| {
                let rows = || log.updates.iter().filter(|row| row.seq > after).take(limit);
                let fit = super::fitting(rows().map(|row| row.update.len() as u64), max_bytes);
                rows().take(fit).cloned().collect()
            })
        }))
    }

    async fn version_base(
        &self,
        room: &RoomName,
        seq: u64,
    ) -> Result<Option<StoredVersion>, StoreError> {
        Ok(self.with(|rooms| rooms.get(room.as_str())?.version_base(seq)))
    }

    async fn last_seq(&self, room: &RoomName) -> Result<u64, StoreError> {
        Ok(self.with(|rooms| rooms.get(room.as_str()).map_or(0, |log| log.last_seq)))
    }

    async fn logs_over(&self, max_bytes: u64) -> Result<Vec<super::OverCap>, StoreError> {
        Ok(self.with(|rooms| {
            let mut over = Vec::new();
            for (name, log) in rooms.iter() {
                let mut tail = 0u64;
                let cut = log.updates.iter().rev().find_map(|row| {
                    tail = tail.saturating_add(row.update.len() as u64);
                    (tail > max_bytes).then_some(row.seq)
                });
                if let (Some(cut), Ok(room)) = (cut, RoomName::parse(name)) {
                    over.push(super::OverCap {
                        room,
                        cut,
                        snapshot: log.snapshot.as_ref().map(|(seq, _)| *seq),
                    });
                }
            }
            over
        }))
    }

    async fn prune_log_to(&self, room: &RoomName, upto: u64) -> Result<u64, StoreError> {
        Ok(self.with(|rooms| {
            let Some(log) = rooms.get_mut(room.as_str()) else {
                return 0;
            };
            let meta = log.checkpoint_meta(u64::MAX);
            let snapshot = log.snapshot.as_ref().map(|(seq, _)| *seq);
            let Some(chain) = prune_chain(&meta, Some(upto), snapshot) else {
                return 0;
            };
            let Some(&keep) = chain.last() else {
                return 0;
            };
            if chain.len() > 1 {
                let Some(full) = squash(&log.checkpoint_data(&chain)) else {
                    return 0;
                };
                log.checkpoints.insert(keep, (None, full));
            }
            let len = log.updates.len();
            log.updates.retain(|row| row.seq > keep);
            log.checkpoints.retain(|seq, _| *seq >= keep);
            (len - log.updates.len()) as u64
        }))
    }

    async fn prune_history(&self, before: u64) -> Result<u64, StoreError> {
        Ok(self.with(|rooms| {
            let mut dropped = 0;
            for log in rooms.values_mut() {
                let old = log
                    .updates
                    .iter()
                    .filter(|row| row.at.is_none_or(|t| t < before))
                    .map(|row| row.seq)
                    .next_back();
                let meta = log.checkpoint_meta(u64::MAX);
                let snapshot = log.snapshot.as_ref().map(|(seq, _)| *seq);
                let Some(chain) = prune_chain(&meta, old, snapshot) else {
                    continue;
                };
                let Some(&keep) = chain.last() else {
                    continue;
                };
                if chain.len() > 1 {
                    let Some(full) = squash(&log.checkpoint_data(&chain)) else {
                        continue;
                    };
                    log.checkpoints.insert(keep, (None, full));
                }
                let len = log.updates.len();
                log.updates.retain(|row| row.seq > keep);
                dropped += (len - log.updates.len()) as u64;
                log.checkpoints.retain(|seq, _| *seq >= keep);
            }
            dropped
        }))
    }
}

/// The side tables, with the fence check of a fenced put against the rooms' fencing tokens.
#[async_trait]
impl SideTables for MemoryStore {
    async fn get(
        &self,
        table: Table,
        room: &RoomName,
        key: &str,
    ) -> Result<Option<Bytes>, StoreError> {
        Ok(self.tables.get(table, room, key))
    }

    async fn list(&self, table: Table, room: &RoomName) -> Result<Vec<Bytes>, StoreError> {
        Ok(self.tables.list(table, room))
    }

    async fn put(
        &self,
        table: Table,
        room: &RoomName,
        key: &str,
        value: Bytes,
        fence: Option<u64>,
    ) -> Result<(), StoreError> {
        let Some(fence) = fence else {
            self.tables.put(table, room, key, value);
            return Ok(());
        };
        // Rooms, then the tables: the only place holding both takes them in this order.
        self.with(|rooms| {
            let newest = rooms
                .get(room.as_str())
                .and_then(|log| log.fences.get(table.fenced_fairy(key)).copied());
            if newest.is_some_and(|newest| newest > fence) {
                return Err(StoreError::Fenced {
                    fairy: table.fenced_fairy(key).to_owned(),
                });
            }
            self.tables.put(table, room, key, value);
            Ok(())
        })
    }

    async fn delete(&self, table: Table, room: &RoomName, key: &str) -> Result<(), StoreError> {
        self.tables.delete(table, room, key);
        Ok(())
    }
}
