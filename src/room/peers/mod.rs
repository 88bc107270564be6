//! Peers: who is joined to a room and what they are sent.
//!
//! # Layout
//! - [`peer`]: a joined peer (identity, bounded outbound queue, close switch).
//! - `session`: joining, a peer's inbound frames, leaving; sending to one peer or all.
//! - `sync`: the answer to a peer's sync step 1; `cold`: the ready answer for a peer that
//!   knows nothing of the document (a cold load).
//! - `presence`: awareness relay, ownership of client ids, timeouts.
//! - `remote`: the other nodes of a scale-out deployment (their durable updates, which sequence
//!   numbers the document holds, relayed awareness).
//!
//! Never touches a socket: the server hands frames in and drains each peer's queue.

pub(crate) mod cold;
pub mod peer;
pub(crate) mod presence;
pub(crate) mod remote;
pub(crate) mod session;
mod sync;
