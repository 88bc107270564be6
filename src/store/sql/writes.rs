//! The writes of a group-commit batch that both SQL backends make alike, on the batch's
//! transaction: a compaction, a checkpoint, a side table's row, and the number of an actor's
//! JSON. Owns only these; each backend's batch (`store::sqlite`, `store::postgres`) keeps the
//! appends, which truly differ (sequence numbers, multi-row inserts, counters, fences), and
//! decides the order.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use super::dialect::{Bind, Dialect, Read, query};
use super::text;
use crate::store::Checkpoint;
use crate::store::keyed::{self, Table};
use crate::store::writer::{known_actor, to_i64};

/// Replaces a room's snapshot ([`Dialect::KEEP_SNAPSHOT`]).
pub(crate) async fn keep_snapshot<D: Dialect>(
    conn: &mut D::Connection,
    room: &str,
    snapshot: &Bytes,
    upto_seq: u64,
) -> Result<(), sqlx::Error> {
    query::<D>(D::KEEP_SNAPSHOT)
        .text(room)
        .int(to_i64(upto_seq))
        .bytes(snapshot)
        .execute(D::on(conn))
        .await?;
    Ok(())
}

/// Keeps a history checkpoint unless a newer one exists ([`text::ADD_CHECKPOINT`]); 1 when
/// kept, else 0.
pub(crate) async fn add_checkpoint<D: Dialect>(
    conn: &mut D::Connection,
    room: &str,
    checkpoint: &Checkpoint,
) -> Result<u64, sqlx::Error> {
    let done = query::<D>(text::ADD_CHECKPOINT)
        .text(room)
        .int(to_i64(checkpoint.seq))
        .opt_int(checkpoint.base.map(to_i64))
        .bytes(&checkpoint.data)
        .int(to_i64(checkpoint.extends))
        .execute(D::on(conn))
        .await?;
    Ok(D::rows_affected(&done))
}

/// Replaces a row of a keyed side table.
pub(crate) async fn put_row<D: Dialect>(
    conn: &mut D::Connection,
    table: Table,
    room: &str,
    key: &str,
    value: &Bytes,
) -> Result<(), sqlx::Error> {
    keyed::sql::upsert::<D>(table, room, key, value)?
        .execute(D::on(conn))
        .await?;
    Ok(())
}

/// Deletes a row of a keyed side table.
pub(crate) async fn delete_row<D: Dialect>(
    conn: &mut D::Connection,
    table: Table,
    room: &str,
    key: &str,
) -> Result<(), sqlx::Error> {
    keyed::sql::delete::<D>(table, room, key)
        .execute(D::on(conn))
        .await?;
    Ok(())
}

/// The number of an actor's JSON in `actors`, added when new: from the writer's cache of
/// committed ones (`known`) or this transaction's (`interned`, which collects the numbers it
/// learnt, kept by the caller only once the transaction committed).
pub(crate) async fn actor_id<D: Dialect>(
    conn: &mut D::Connection,
    known: &HashMap<Arc<str>, i64>,
    interned: &mut Vec<(Arc<str>, i64)>,
    actor: &Arc<str>,
) -> Result<i64, sqlx::Error> {
    if let Some(id) = known_actor(known, interned, actor) {
        return Ok(id);
    }
    query::<D>(text::ADD_ACTOR)
        .text(actor)
        .execute(D::on(&mut *conn))
        .await?;
    let id = query::<D>(text::ACTOR_ID)
        .text(actor)
        .fetch_one(D::on(conn))
        .await?
        .int(0)?;
    interned.push((actor.clone(), id));
    Ok(id)
}
