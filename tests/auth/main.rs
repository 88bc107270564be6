//! Tokens and admission: the token matrix at the auth-module level and through the real server,
//! and `serve --dev`'s secret kept over a restart.
//!
//! One test binary (linked once), one module per file `tests/auth/NAME.rs`. Run one file's tests with
//! `cargo test --test auth NAME::`.

#[path = "../support/mod.rs"]
mod support;

mod auth_matrix;
mod auth_tokens;
mod dev_restart;
