//! The JavaScript packages, run from `cargo test` against the real server binary: the client
//! package (`clients/js`), the tldraw binding in a browser, and the web demo's checks.
//!
//! One test binary (linked once), one module per file `tests/browser/NAME.rs`. Run one file's tests with
//! `cargo test --test browser NAME::`.

#[path = "../support/mod.rs"]
mod support;

mod client_js;
mod tldraw_browser;
mod web_demo_browser;
