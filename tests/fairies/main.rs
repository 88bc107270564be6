//! Fairies and their models: fairies end to end (real server, yrs client, offline or mock model),
//! review mode, the model clients (`llm_*`: both wire formats over loopback HTTP against the mock
//! model server), the partial-JSON parser's properties, the pinned response schema, and the
//! opt-in test with a real model (`real_model`, `--ignored`).
//!
//! One test binary (linked once), one module per file `tests/fairies/NAME.rs`. Run one file's tests with
//! `cargo test --test fairies fairies:: NAME::`.

#[path = "../support/mod.rs"]
mod support;

mod fairies;
mod fairies_budget;
mod fairies_faults;
mod fairies_flow;
mod fairies_latency;
mod fairies_limits;
mod fairies_people_first;
mod fairies_private_state;
mod fairies_projects;
mod fairies_prompt;
mod fairies_revert;
mod fairies_sight;
mod fairies_stream;
mod llm_cancel;
mod llm_failover;
mod llm_first_byte;
mod llm_misbehave;
mod llm_offline;
mod llm_stream;
mod llm_structured;
mod llm_usage_wire;
mod partial_json_props;
mod real_model;
mod response_schema;
mod review;
