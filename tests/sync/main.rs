//! The sync core and what a room refuses: real WebSocket clients (and the official JavaScript
//! ones) against the real server, untrusted documents and awareness, limits, the room pipeline's
//! convergence and merge properties, the sanitizing and streaming of canvas actions, and the
//! replay of every committed fuzz corpus.
//!
//! One test binary (linked once), one module per file `tests/sync/NAME.rs`. Run one file's tests with
//! `cargo test --test sync sync:: NAME::`.

#[path = "../support/mod.rs"]
mod support;

mod canvas_merge;
mod canvas_sanitize;
mod canvas_stream_size;
mod clock_steps;
mod fuzz_corpus;
mod interop;
mod limits;
mod slow_reader;
mod sync;
mod sync_props;
mod untrusted_awareness;
mod untrusted_document;
mod update_allocation;
