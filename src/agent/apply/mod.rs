//! Applying a fairy's actions to the canvas and keeping account of it: still-streaming
//! actions applied revertibly ([`tentative`]) and only when worth it ([`throttle`]); review
//! mode's private copy whose changes become suggestions ([`suggest`]); the changes that were
//! not the fairy's own ([`changes`]); what each request changed ([`ledger`]) and taking a
//! request back ([`revert`]).
//!
//! Owns the document writes of a turn's canvas actions and their records; must not parse
//! actions (the [`super::actions`] registry does) or decide what a mode may do
//! ([`super::modes`]).

pub mod changes;
pub mod ledger;
pub mod revert;
pub mod suggest;
pub mod tentative;
pub mod throttle;
