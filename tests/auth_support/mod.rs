//! Helpers shared by integration tests (each test crate uses a subset, hence `dead_code`).
#![allow(dead_code)]

pub mod token_matrix;
