//! What a room answers when it refuses a writer or closes a peer ([`RoomError`]), and why its
//! committer stopped ([`Failure`]), which its waiting writers are told. The network edge maps
//! each to a status or close code (`server::error`); nothing here knows of sockets.

use crate::protocol::ProtocolError;
use crate::room::vet::{roots, size};

/// Why a room refused or closed a peer. The server maps each to an HTTP status or close code.
#[derive(Debug, thiserror::Error)]
pub enum RoomError {
    /// The frame was not a valid y-protocols message.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// A document update yrs could not decode or apply.
    #[error("invalid document update: {0}")]
    BadUpdate(String),
    /// A peer's update writes or deletes under a root only the server writes.
    #[error("`{0}` is written by the server only")]
    ServerOwned(roots::ServerRoot),
    /// A peer's awareness state larger than `--max-awareness-bytes`.
    #[error("awareness state of {bytes} bytes exceeds the limit of {max}")]
    AwarenessTooBig {
        /// The state's size (its JSON).
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// A peer's awareness state that is not a JSON object (nor `null`, a removal).
    #[error("awareness state is not a JSON object: {0}")]
    BadAwareness(String),
    /// The peer did not read its frames fast enough; it will resync when it reconnects.
    #[error("outbound queue full: peer too slow")]
    SlowConsumer,
    /// The room has as many connections as allowed.
    #[error("room is full")]
    RoomFull,
    /// The process has as many rooms loaded as allowed.
    #[error("too many rooms loaded")]
    TooManyRooms,
    /// The store failed (or did not answer within `--store-timeout-ms`); the room is
    /// unloading and peers should reconnect.
    #[error("storage failure")]
    Store,
    /// The store's disk is full: the write was not kept (nor shown to anyone); writing
    /// resumes when space returns, reading goes on.
    #[error("the store's disk is full: writes are refused until space returns")]
    StoreFull,
    /// The room is unloading or the server shutting down.
    #[error("room closed")]
    Closed,
    /// The store refused a write of a fairy this node hosted, which another node took over
    /// while this one stalled (docs/scaling.md "Fencing"): the room reloads and peers should
    /// reconnect.
    #[error("a fairy's host was taken over by another node; the room reloads")]
    Fenced,
    /// The update would take the room's document past `--max-doc-bytes`.
    #[error(transparent)]
    DocTooLarge(#[from] size::TooLarge),
}

/// Why a room's committer stopped after a failed commit: what its waiting writers are told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Failure {
    /// It did not fail.
    None = 0,
    /// The store failed or did not answer in time ([`RoomError::Store`]).
    Store = 1,
    /// The store's disk is full ([`RoomError::StoreFull`]).
    Full = 2,
    /// A fairy's write was fenced ([`RoomError::Fenced`]).
    Fenced = 3,
}

impl Failure {
    pub(crate) fn from_u8(value: u8) -> Self {
        match value {
            1 => Failure::Store,
            2 => Failure::Full,
            3 => Failure::Fenced,
            _ => Failure::None,
        }
    }

    /// The error a writer of the failed room is answered (`None`: it did not fail).
    pub(crate) fn error(self) -> Option<RoomError> {
        match self {
            Failure::None => None,
            Failure::Store => Some(RoomError::Store),
            Failure::Full => Some(RoomError::StoreFull),
            Failure::Fenced => Some(RoomError::Fenced),
        }
    }
}
