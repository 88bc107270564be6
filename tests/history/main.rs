//! History and storage: the kept log and its reads, cold loads, durability over `kill -9`, and
//! what a node does when its store fails (down, stalled, cut, restarted, full disk).
//!
//! One test binary (linked once), one module per file `tests/history/NAME.rs`. Run one file's tests with
//! `cargo test --test history history:: NAME::`.

#[path = "../support/mod.rs"]
mod support;

mod cold_load;
mod disk_full;
mod durability;
mod history;
mod store_down;
mod store_faults;
