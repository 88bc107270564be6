//! More than one process: scale-out over PostgreSQL and Redis, a stalled Redis, what the shipped
//! binary sets up for itself, and the bench's soak.
//!
//! One test binary (linked once), one module per file `tests/scale/NAME.rs`. Run one file's tests with
//! `cargo test --test scale scale:: NAME::`.

#[path = "../support/mod.rs"]
mod support;

mod process;
mod redis_stall;
mod scale;
mod soak;
