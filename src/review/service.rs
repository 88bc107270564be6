//! People's decisions written into a live room (README "Review mode"): one suggestion accepted
//! or rejected, or every pending suggestion of one fairy request, each as one transaction
//! logged in the room's history — an accept as the fairy's write with `acceptedBy` (the person),
//! a reject as the person's (`via: "api"`).
//!
//! Owns the transaction around [`super::decide`]'s rules and the actor it is logged with.
//! Touches no socket and no store (the room logs the update).

use std::sync::Arc;

use super::decide::{self, DecideError, Verdict};
use super::record::{self, Suggestion};
use crate::actor::{Actor, Via};
use crate::ids::{FairyId, RequestId, SuggestionId};
use crate::room::{Room, RoomError};

/// Why a decision could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The decision itself was refused (unknown, decided already, a conflict).
    #[error(transparent)]
    Decide(#[from] DecideError),
    /// The room refused the write (closing, store down, document full).
    #[error(transparent)]
    Room(#[from] RoomError),
}

/// The person deciding: their token's `sub` and `name`.
#[derive(Debug, Clone)]
pub struct Person {
    /// The token's `sub`.
    pub sub: String,
    /// The token's `name`, if any.
    pub name: Option<String>,
    /// Whether the token may decide suggestions (it has the `write` scope): without it, what
    /// would reject suggestions on the way (a revert) leaves them pending.
    pub may_decide: bool,
}

/// A decision written.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    /// The record as decided.
    pub record: Suggestion,
    /// The sequence number of the update that carries it.
    pub seq: u64,
}

/// The outcome of accepting a whole request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RequestAccepted {
    /// The suggestions applied.
    pub accepted: Vec<SuggestionId>,
    /// The ones that could not be (their shape deleted, their id taken): marked rejected, with
    /// why.
    pub conflicts: Vec<(SuggestionId, DecideError)>,
    /// The sequence number of the update (the room's last when nothing was pending).
    pub seq: u64,
}

fn now() -> f64 {
    crate::clock::system().unix_millis() as f64
}

/// The fairy as the author of an accepted suggestion, accepted by `by`.
fn accepted_actor(record: &Suggestion, by: &Person) -> Actor {
    Actor::Fairy {
        id: record.fairy_id.to_string(),
        request_id: record.request_id.to_string(),
        prompted_by: record.prompted_by.clone(),
        model: record.model.clone(),
        project_id: None,
        task_id: None,
        accepted_by: Some(by.sub.clone()),
    }
}

/// A bound on what applying `record` adds to the document (its props as JSON).
fn write_bound(record: &Suggestion) -> u64 {
    let json = serde_json::to_vec(&record.props_json()).map_or(0, |v| v.len());
    crate::room::vet::size::json_write_bound(json)
}

/// Accepts or rejects the pending suggestion `id` as `by`.
pub async fn decide(
    room: &Arc<Room>,
    id: &SuggestionId,
    verdict: Verdict,
    by: &Person,
) -> Result<Decided, ReviewError> {
    // Read first to name the actor (the fairy, for an accept); checked again in the write.
    let record = decide::pending(&yrs::Transact::transact(room.doc()), id)?;
    let actor = match verdict {
        Verdict::Accept => accepted_actor(&record, by),
        Verdict::Reject => Actor::user(by.sub.clone(), by.name.clone()).via(Via::Api),
    };
    let mut outcome: Option<Result<Suggestion, DecideError>> = None;
    let seq = room
        .write_as(&actor, |txn| {
            if verdict == Verdict::Accept {
                room.admit_in(txn, write_bound(&record))?;
            }
            let decided = decide::decide_in(txn, id, verdict, &by.sub, now());
            let wrote = decided.is_ok();
            outcome = Some(decided);
            Ok(wrote)
        })
        .await?;
    match outcome {
        Some(Ok(record)) => Ok(Decided { record, seq }),
        Some(Err(error)) => Err(error.into()),
        None => Err(DecideError::NotFound(id.to_string()).into()),
    }
}

/// Accepts every pending suggestion of `fairy`'s `request` as `by`, in one transaction; those
/// that conflict are rejected with the conflict reported. Nothing pending: nothing written.
pub async fn accept_request(
    room: &Arc<Room>,
    fairy: &FairyId,
    request: &RequestId,
    by: &Person,
) -> Result<RequestAccepted, ReviewError> {
    let pending = record::pending_of(&yrs::Transact::transact(room.doc()), fairy, Some(request));
    let Some(first) = pending.first() else {
        room.flushed().await;
        return Ok(RequestAccepted {
            seq: room.committed_seq(),
            ..RequestAccepted::default()
        });
    };
    let actor = accepted_actor(first, by);
    let bound = pending.iter().map(write_bound).sum();
    let mut outcome = RequestAccepted::default();
    let seq = room
        .write_as(&actor, |txn| {
            room.admit_in(txn, bound)?;
            // Read again inside the write: what is pending now.
            let (accepted, conflicts) = decide::accept_all_in(txn, fairy, request, &by.sub, now());
            outcome.accepted = accepted;
            outcome.conflicts = conflicts;
            Ok(!outcome.accepted.is_empty() || !outcome.conflicts.is_empty())
        })
        .await?;
    outcome.seq = seq;
    Ok(outcome)
}

/// Rejects every pending suggestion of `fairy`'s `request` as `by` (a revert of a review-mode
/// request); the ids rejected.
pub async fn reject_request(
    room: &Arc<Room>,
    fairy: &FairyId,
    request: &RequestId,
    by: &Person,
) -> Result<Vec<SuggestionId>, RoomError> {
    let pending = record::pending_of(&yrs::Transact::transact(room.doc()), fairy, Some(request));
    if pending.is_empty() || !by.may_decide {
        return Ok(Vec::new());
    }
    let actor = Actor::user(by.sub.clone(), by.name.clone()).via(Via::Api);
    let mut rejected = Vec::new();
    room.write_as(&actor, |txn| {
        let at = now();
        for record in record::pending_of(txn, fairy, Some(request)) {
            if decide::decide_in(txn, &record.id, Verdict::Reject, &by.sub, at).is_ok() {
                rejected.push(record.id);
            }
        }
        Ok(!rejected.is_empty())
    })
    .await?;
    Ok(rejected)
}
