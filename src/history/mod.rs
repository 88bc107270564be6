//! History (docs/storage.md "History"): who changed what in a room, and the room as it was.
//!
//! Owns the reading side of the attributed log: [`actor`] (who wrote an update, as logged),
//! [`replay`] (a room's stored log replayed in a private document: what each update did,
//! versions as JSON, restore and rollback edits) and [`service`] (history pages, versions,
//! restore and rollback of a room through the store and the live room), and [`checkpoint`]
//! (building the checkpoints versions start from, off the live room), [`retention`] (the
//! byte cap on a room's kept log, `--history-max-bytes`), and [`undo`] (the one rule of undoing
//! an actor, which rollback and a fairy's take-back of a request both decide with). The writing side —
//! naming the actor of each transaction and logging it with the update — belongs to the room
//! (`room::writes::actors`, the committer) and the store. Must not touch sockets or HTTP.

pub mod checkpoint;
pub mod replay;
pub mod retention;
pub mod service;
pub mod undo;

/// Most bytes of logged updates a history read takes from the store at a time (at least one
/// update, whatever its size: an update is at most `--max-message-bytes`, or a REST body):
/// versions, pages, rollbacks and checkpoints read the log in batches bounded in bytes, never a
/// whole log at once (docs/limits.md "History").
pub const BATCH_BYTES: u64 = 4 << 20;
