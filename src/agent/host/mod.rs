//! Hosting fairies: what stands between the outside (the HTTP edge, the rooms, the model
//! provider) and a fairy's runtime. One task per fairy per loaded room ([`hub`], with a
//! person's prompt and cancel — the edge's entry point —, group prompts, node leases and
//! cross-node delivery as children), reached through an [`inbox`] that never refuses an
//! interrupt; the [`events`] its observers see; the token [`budget`]s (per room per hour,
//! per person and per project per day) around every model call, with the [`usage`] totals
//! they record; and the [`executor`] fairies run on, below the people's work.
//!
//! Owns the tasks and channels around a runtime; must not build prompts, parse or apply
//! actions (the runtime's, [`super::runtime`]) or write fairy state itself (the state saver's,
//! [`super::state::store`]).

pub mod budget;
pub mod executor;
pub mod hub;
pub mod inbox;
pub mod migration;
pub mod usage;
