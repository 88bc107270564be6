//! Property tests of `fairyring::partial_json` on random JSON values written in random styles
//! (escapes, `\u` escapes with surrogate pairs, whitespace) and cut into random chunks:
//! complete texts parse exactly like `serde_json`, every prefix is consistent with the final
//! value, chunked equals whole, and action events come once each and in order (also after prose,
//! fences and `<think>` blocks holding JSON).

use fairyring::partial_json::{
    ACTIONS_PREFILL, ActionStream, PartialJson, StreamedAction, parse_partial,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Random JSON values: nested, with unicode, quotes, backslashes and control characters.
fn json_value() -> impl Strategy<Value = Value> {
    let text = prop_oneof![
        "[a-z \"\\\\/]{0,8}",
        "[\\x00-\\x1f\u{7f}\u{e9}\u{2028}\u{ffff}\u{1f600}]{0,6}",
        any::<String>(),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        text.clone().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-z_\"\\\\é😀]{0,6}", inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Writes `value` as JSON, choosing per character (from `style`'s bits) whether to escape it as
/// `\uXXXX` (surrogate pairs beyond the BMP) and per token whether to add whitespace.
fn write(value: &Value, style: u64, out: &mut String, n: &mut u32) {
    let mut bit = || {
        *n = n.wrapping_add(1);
        style.rotate_left(*n % 64) & 1 == 1
    };
    if bit() {
        out.push_str(if bit() { " " } else { "\n\t " });
    }
    match value {
        Value::String(s) => {
            out.push('"');
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '/' if bit() => out.push_str("\\/"),
                    '\n' if bit() => out.push_str("\\n"),
                    c if (c as u32) < 0x20 || bit() => {
                        let mut units = [0u16; 2];
                        for unit in c.encode_utf16(&mut units) {
                            out.push_str(&format!("\\u{unit:04x}"));
                        }
                    }
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, style, out, n);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(&Value::String(key.clone()), style, out, n);
                out.push(':');
                write(item, style, out, n);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn styled(value: &Value, style: u64) -> String {
    let mut out = String::new();
    write(value, style, &mut out, &mut 0);
    out
}

/// Cuts `text` into chunks of the given sizes (cycled), moved forward to char boundaries.
fn chunks<'a>(text: &'a str, sizes: &[usize]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while start < text.len() {
        let size = sizes
            .get(i % sizes.len().max(1))
            .copied()
            .unwrap_or(1)
            .max(1);
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

/// Whether `partial` is consistent with `full`: strings are prefixes, containers hold a
/// consistent prefix of the final content with at most one open (unequal) member, and every
/// other value is equal. `top` allows the one documented exception, a whole-text number.
fn consistent(partial: &Value, full: &Value, top: bool) -> bool {
    match (partial, full) {
        (Value::String(p), Value::String(f)) => f.starts_with(p.as_str()),
        (Value::Number(_), Value::Number(_)) if top => true,
        (Value::Array(p), Value::Array(f)) => {
            p.len() <= f.len()
                && p.iter().zip(f).enumerate().all(|(i, (pv, fv))| {
                    if i + 1 == p.len() {
                        consistent(pv, fv, false)
                    } else {
                        pv == fv
                    }
                })
        }
        (Value::Object(p), Value::Object(f)) => {
            let mut open = 0;
            p.iter().all(|(k, pv)| match f.get(k) {
                Some(fv) if pv == fv => true,
                Some(fv) => {
                    open += 1;
                    open == 1 && consistent(pv, fv, false)
                }
                None => false,
            })
        }
        (p, f) => p == f,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn complete_text_parses_like_serde_json(value in json_value(), style in any::<u64>()) {
        let text = styled(&value, style);
        let expected: Value = serde_json::from_str(&text).expect("writer emits valid JSON");
        prop_assert_eq!(parse_partial(&text), Some(expected));
    }

    #[test]
    fn chunked_prefixes_are_whole_parses_and_consistent(
        value in json_value(),
        style in any::<u64>(),
        sizes in prop::collection::vec(1usize..24, 1..8),
    ) {
        let text = styled(&value, style);
        let full: Value = serde_json::from_str(&text).expect("valid");
        let mut inc = PartialJson::new();
        let mut seen = 0;
        for chunk in chunks(&text, &sizes) {
            inc.push(chunk);
            seen += chunk.len();
            let now = inc.value();
            prop_assert_eq!(&now, &parse_partial(&text[..seen]), "prefix {:?}", &text[..seen]);
            if let Some(now) = &now {
                prop_assert!(consistent(now, &full, true), "{} vs {}", now, full);
            }
        }
        // A whole-text number is never "complete": more digits could follow.
        prop_assert_eq!(inc.is_complete(), !full.is_number());
        prop_assert_eq!(inc.value(), Some(full));
        prop_assert!(inc.error().is_none());
    }

    #[test]
    fn every_char_prefix_is_consistent(value in json_value(), style in any::<u64>()) {
        let text = styled(&value, style);
        let full: Value = serde_json::from_str(&text).expect("valid");
        for (i, _) in text.char_indices() {
            if let Some(now) = parse_partial(&text[..i]) {
                prop_assert!(consistent(&now, &full, true), "{:?}: {} vs {}", &text[..i], now, full);
            }
        }
    }

    #[test]
    fn arbitrary_text_never_panics_and_chunking_does_not_matter(
        text in any::<String>(),
        sizes in prop::collection::vec(1usize..8, 1..4),
    ) {
        let mut inc = PartialJson::new();
        for chunk in chunks(&text, &sizes) {
            inc.push(chunk);
        }
        let mut whole = PartialJson::new();
        whole.push(&text);
        prop_assert_eq!(inc.value(), whole.value());
        prop_assert_eq!(inc.error(), whole.error());
    }

    #[test]
    fn think_blocks_never_leak_actions(
        inner in "[a-z{}\\[\\]\":, <>/]{0,40}",
        sizes in prop::collection::vec(1usize..12, 1..6),
    ) {
        // Whatever the block holds (except its closing tag), only the real actions count.
        prop_assume!(!inner.contains("</think>"));
        let text = format!("<think>{inner}</think>{{\"actions\": [{{\"_type\": \"real\"}}]}}");
        let mut stream = ActionStream::new();
        let mut completes = Vec::new();
        for chunk in chunks(&text, &sizes) {
            completes.extend(stream.push(chunk).into_iter().filter(|e| e.complete).map(|e| e.action));
        }
        prop_assert_eq!(completes, vec![json!({"_type": "real"})]);
        prop_assert!(stream.is_done());
    }

    #[test]
    fn action_events_come_once_each_and_in_order(
        actions in prop::collection::vec(json_value(), 0..6),
        style in any::<u64>(),
        wrapper in 0usize..5,
        sizes in prop::collection::vec(1usize..20, 1..6),
    ) {
        let body = styled(&json!({ "actions": actions }), style);
        let expected: Value = serde_json::from_str(&body).expect("valid");
        let expected = expected["actions"].as_array().cloned().unwrap_or_default();
        let (stream, text) = match wrapper {
            0 => (ActionStream::new(), body),
            1 => (ActionStream::new(), format!("Sure {{ok}}! Plan:\n```json\n{body}\n```\nbye")),
            2 => (ActionStream::new(), format!("{{\"note\": [1]}} {{ bad \n{body} {{\"actions\": [9]}}")),
            3 => {
                // An inline reasoning block holding braces and a decoy actions object.
                let decoy = styled(&json!({ "actions": [{"_type": "decoy"}] }), style);
                (ActionStream::new(), format!("<think>{{ maybe {decoy} }}</think>\n{body}"))
            }
            _ => {
                let (text, expected) = prefill_case(&actions, style);
                return check_stream(ActionStream::with_prefill(ACTIONS_PREFILL), &text, &sizes, &expected);
            }
        };
        check_stream(stream, &text, &sizes, &expected)?;
    }
}

/// The model's text after the prefill for these actions (the first one becomes an object
/// starting with `"_type"`), and the actions it encodes.
fn prefill_case(actions: &[Value], style: u64) -> (String, Vec<Value>) {
    let mut n = 0;
    let first_type = actions.first().cloned().unwrap_or(Value::Null);
    let mut text = String::new();
    write(&first_type, style, &mut text, &mut n);
    let mut first = Map::new();
    first.insert("_type".into(), first_type);
    if let Some(Value::Object(fields)) = actions.get(1) {
        for (key, value) in fields.iter().filter(|(k, _)| *k != "_type") {
            text.push(',');
            write(&Value::String(key.clone()), style, &mut text, &mut n);
            text.push(':');
            write(value, style, &mut text, &mut n);
            first.insert(key.clone(), value.clone());
        }
    }
    text.push('}');
    let mut expected = vec![Value::Object(first)];
    for action in actions.iter().skip(2) {
        text.push(',');
        write(action, style, &mut text, &mut n);
        expected.push(action.clone());
    }
    text.push_str("]}");
    let whole: Value = serde_json::from_str(&format!("{ACTIONS_PREFILL}{text}")).expect("valid");
    // Compare with what serde_json parses (floats do not all round-trip through text).
    let parsed = whole["actions"].as_array().cloned().unwrap_or_default();
    assert_eq!(parsed.len(), expected.len());
    (text, parsed)
}

/// Feeds `text` in chunks and checks the event contract against the expected actions.
fn check_stream(
    mut stream: ActionStream,
    text: &str,
    sizes: &[usize],
    expected: &[Value],
) -> Result<(), TestCaseError> {
    let mut events: Vec<StreamedAction> = Vec::new();
    for chunk in chunks(text, sizes) {
        events.extend(stream.push(chunk));
    }
    events.extend(stream.finish());
    prop_assert!(stream.error().is_none(), "{:?}", stream.error());
    prop_assert!(stream.is_done());
    let mut next = 0;
    let mut last: Option<&StreamedAction> = None;
    for event in &events {
        prop_assert_eq!(event.index, next, "out of order: {:?}", events);
        let full = expected.get(event.index);
        prop_assert!(full.is_some(), "event beyond the actions: {:?}", event);
        let full = full.cloned().unwrap_or_default();
        if event.complete {
            prop_assert_eq!(&event.action, &full);
            next += 1;
        } else {
            prop_assert!(
                consistent(&event.action, &full, false),
                "{} vs {}",
                event.action,
                full
            );
            if let Some(prev) = last.filter(|p| p.index == event.index && !p.complete) {
                prop_assert_ne!(&prev.action, &event.action, "unchanged snapshot re-emitted");
            }
        }
        last = Some(event);
    }
    prop_assert_eq!(next, expected.len());
    Ok(())
}
