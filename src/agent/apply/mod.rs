//! Applying a fairy's actions to the canvas and keeping account of it: still-streaming
//! actions applied revertibly ([`tentative`]) and only when worth it ([`throttle`]); review
//! mode's private copy whose changes become suggestions ([`suggest`]); the one of the two a
//! turn's actions land in ([`landing`]); the changes that were
//! not the fairy's own ([`changes`]); and what each request changed ([`ledger`]), which the
//! runtime's [`crate::agent::runtime::revert`] takes back.
//!
//! Owns the document writes of a turn's canvas actions and their records; must not parse
//! actions (the [`super::actions`] registry does) or decide what a mode may do
//! ([`super::modes`]).

pub mod changes;
pub mod landing;
pub mod ledger;
#[cfg(test)]
mod streamed_cost;
pub mod suggest;
pub mod tentative;
pub mod throttle;
