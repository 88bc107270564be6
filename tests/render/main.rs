//! Drawing: golden renders of the fixture room, exports over HTTP (scopes, budgets, abandoned
//! renders, SIGTERM during a render), and the render measurements (`render_bench`, `--ignored`).
//!
//! One test binary (linked once), one module per file `tests/render/NAME.rs`. Run one file's tests with
//! `cargo test --test render NAME::`.

#[path = "../support/mod.rs"]
mod support;

mod export;
mod export_abandoned;
mod export_budget;
mod export_shutdown;
mod render_bench;
mod render_golden;
