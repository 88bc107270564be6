//! Fuzz check for `partial_json` (shared by the cargo-fuzz target and `tests/sync/fuzz_corpus.rs`).
//!
//! The input is the text (invalid UTF-8 replaced) and, through its own bytes, the chunking.
//! Asserts: no panic; chunked pushes give the same value, error and completeness as one push;
//! `parse_partial` equals the incremental value; a text `serde_json` accepts gives exactly its
//! value, and a text we call complete and valid is one `serde_json` accepts.

use fairyring::partial_json::{PartialJson, parse_partial};
use serde_json::Value;

/// Chunks of `text` whose sizes (1 to 16 bytes, moved to char boundaries) come from `data`.
pub fn chunks<'a>(text: &'a str, data: &[u8]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while start < text.len() {
        let size = usize::from(data.get(i % data.len().max(1)).copied().unwrap_or(0) % 16) + 1;
        let mut end = (start + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
        i += 1;
    }
    out
}

/// Must never panic, whatever the bytes; panics (fails) when an invariant breaks.
pub fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut whole = PartialJson::new();
    whole.push(&text);
    let mut chunked = PartialJson::new();
    for chunk in chunks(&text, data) {
        chunked.push(chunk);
        let _ = chunked.value();
    }
    let value = whole.value();
    assert_eq!(chunked.value(), value, "chunked != whole");
    assert_eq!(
        chunked.error(),
        whole.error(),
        "chunked error != whole error"
    );
    assert_eq!(chunked.is_complete(), whole.is_complete());
    assert_eq!(parse_partial(&text), value, "parse_partial != PartialJson");
    match serde_json::from_str::<Value>(&text) {
        Ok(expected) => {
            assert_eq!(
                value,
                Some(expected),
                "complete text differs from serde_json"
            );
            assert!(whole.error().is_none(), "valid text reported invalid");
        }
        Err(_) => assert!(
            whole.error().is_some() || !whole.is_complete(),
            "invalid text accepted as complete"
        ),
    }
}
