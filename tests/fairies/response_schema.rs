//! Pins the response schema the model sees (docs/fairies.md "Actions"): for every mode, the
//! exact text of `response_schema_for(full_registry, mode.allowed_actions())` as the prompt
//! prints it, plus the whole registry's schema, compared byte for byte with the committed
//! `tests/fixtures/response_schema.json`. A refactoring of the actions must leave it unchanged;
//! a deliberate schema change regenerates the file with `UPDATE_RESPONSE_SCHEMA=1` and says why
//! in its commit.

use fairyring::agent::actions::runtime::{full_registry, response_schema_for};
use fairyring::agent::modes::Mode;
use serde_json::{Map, Value};

const EXPECTED: &str = "tests/fixtures/response_schema.json";

fn current() -> String {
    let registry = full_registry();
    let mut all = Map::new();
    all.insert("(full registry)".into(), registry.response_schema());
    for mode in Mode::ALL {
        all.insert(
            mode.name().into(),
            response_schema_for(&registry, &mode.allowed_actions()),
        );
    }
    let mut text = serde_json::to_string_pretty(&Value::Object(all)).unwrap_or_default();
    text.push('\n');
    text
}

#[test]
fn the_model_sees_the_pinned_response_schemas() {
    let now = current();
    if std::env::var_os("UPDATE_RESPONSE_SCHEMA").is_some() {
        std::fs::write(EXPECTED, &now).unwrap_or_else(|e| panic!("write {EXPECTED}: {e}"));
    }
    let expected =
        std::fs::read_to_string(EXPECTED).unwrap_or_else(|e| panic!("read {EXPECTED}: {e}"));
    if now != expected {
        let line = now
            .lines()
            .zip(expected.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| "at the end".to_owned(), |n| format!("at line {}", n + 1));
        panic!("the response schema differs from {EXPECTED} {line}");
    }
}
