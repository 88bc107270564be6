//! The HTTP surface: REST writes, the OpenAPI description, signed webhooks, and the bounds on
//! every read and write.
//!
//! One test binary (linked once), one module per file `tests/http/NAME.rs`. Run one file's tests with
//! `cargo test --test http NAME::`.

#[path = "../support/mod.rs"]
mod support;

mod bounds;
mod openapi;
mod rest;
mod webhooks;
