//! The value-level API: [`PartialJson`] (incremental) and [`parse_partial`] (one shot).
//!
//! Owns: the public face of the parser for callers that want "the best value so far". Must not
//! touch: parsing rules (`parser`, `lexer`) or actions (`action_stream`).

use serde_json::Value;

use super::PartialJsonError;
use super::parser::{KeepAll, Parser};

/// The best value for a possibly incomplete JSON text, following the module's omission rules:
/// unclosed containers closed, incomplete numbers/literals/keys omitted, dangling escapes
/// dropped; `None` when no value has started. A complete text gives exactly what
/// `serde_json::from_str` gives. For an invalid text, the value of its longest valid prefix.
pub fn parse_partial(text: &str) -> Option<Value> {
    let mut parser = PartialJson::new();
    parser.push(text);
    parser.value()
}

/// An incrementally parsed JSON text. Each `push` costs time proportional to the chunk (state
/// is kept across pushes, nothing is re-scanned); `value` costs the size of the values still
/// open. After any sequence of pushes, `value()` equals `parse_partial` of their concatenation.
#[derive(Debug, Clone)]
pub struct PartialJson {
    parser: Parser,
}

impl Default for PartialJson {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialJson {
    /// A parser that has seen nothing yet.
    pub fn new() -> Self {
        Self {
            parser: Parser::new(false),
        }
    }

    /// Appends the next piece of the text. After an error, input is ignored.
    pub fn push(&mut self, chunk: &str) {
        self.parser.feed(chunk, &mut KeepAll);
    }

    /// The best value of everything pushed so far (see [`parse_partial`]).
    pub fn value(&self) -> Option<Value> {
        self.parser.value()
    }

    /// Why the text stopped being valid JSON, if it did; `value()` then reflects the valid
    /// prefix before the offending byte.
    pub fn error(&self) -> Option<&PartialJsonError> {
        self.parser.error()
    }

    /// Whether the root value is finished (a later non-whitespace byte would be an error).
    pub fn is_complete(&self) -> bool {
        self.parser.root().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(text: &str) -> Option<Value> {
        parse_partial(text)
    }

    #[test]
    fn nothing_started_is_none() {
        assert_eq!(p(""), None);
        assert_eq!(p("  \n\t"), None);
        assert_eq!(p("tru"), None);
        assert_eq!(p("-"), None);
        assert_eq!(p("1."), None);
    }

    #[test]
    fn unclosed_containers_are_closed() {
        assert_eq!(p("{"), Some(json!({})));
        assert_eq!(
            p("[1, [2, {\"a\": [true"),
            Some(json!([1, [2, {"a": [true]}]]))
        );
        assert_eq!(p("[\"ab"), Some(json!(["ab"])));
        assert_eq!(p("{\"a\": \"x"), Some(json!({"a": "x"})));
        assert_eq!(p("{\"a\": \""), Some(json!({"a": ""})));
    }

    #[test]
    fn incomplete_scalars_and_keys_are_omitted() {
        assert_eq!(p("[1, 2"), Some(json!([1])));
        assert_eq!(p("[1, 2,"), Some(json!([1, 2])));
        assert_eq!(p("[1, -"), Some(json!([1])));
        assert_eq!(p("[1, 2.5e"), Some(json!([1])));
        assert_eq!(p("[tr"), Some(json!([])));
        assert_eq!(p("[true"), Some(json!([true])));
        assert_eq!(p("[nul"), Some(json!([])));
        assert_eq!(p("{\"ke"), Some(json!({})));
        assert_eq!(p("{\"key\""), Some(json!({})));
        assert_eq!(p("{\"key\":"), Some(json!({})));
        assert_eq!(p("{\"key\": 12"), Some(json!({})));
        assert_eq!(p("{\"key\": 12}"), Some(json!({"key": 12})));
        assert_eq!(p("{\"a\": 1, \"b\": fals"), Some(json!({"a": 1})));
    }

    #[test]
    fn a_whole_text_number_is_ended_by_the_end() {
        assert_eq!(p("12"), Some(json!(12)));
        assert_eq!(p("-0.5e3"), Some(json!(-500.0)));
        assert_eq!(p(" 7 "), Some(json!(7)));
    }

    #[test]
    fn escaped_backslash_before_quote_closes_the_string() {
        // tldraw's bug: `"C:\\"` must end the string, not escape the quote.
        let text = r#"{"path": "C:\\", "next": "ok"}"#;
        assert_eq!(p(text), Some(json!({"path": "C:\\", "next": "ok"})));
        assert_eq!(
            p(r#"{"path": "C:\\", "next": "o"#),
            Some(json!({"path": "C:\\", "next": "o"}))
        );
    }

    #[test]
    fn dangling_escapes_are_dropped() {
        assert_eq!(p(r#"["a\"#), Some(json!(["a"])));
        assert_eq!(p(r#"["a\u00"#), Some(json!(["a"])));
        assert_eq!(p(r#"["a\u00e9"#), Some(json!(["aé"])));
        assert_eq!(p(r#"["a\ud83d"#), Some(json!(["a"])));
        assert_eq!(p(r#"["a\ud83d\ude00"#), Some(json!(["a😀"])));
        assert_eq!(p(r#"["a\n"#), Some(json!(["a\n"])));
    }

    #[test]
    fn complete_texts_equal_serde_json() {
        let texts = [
            r#"{"a": [1, 2.5, -3e2, 0, -0, 1E+2, 18446744073709551615, 18446744073709551616]}"#,
            r#"[true, false, null, "", "\u0000\b\f\n\r\t\/\"\\", {}, []]"#,
            r#"  {"dup": 1, "dup": 2, "nested": {"x": {"y": ["z"]}}}  "#,
            r#""just a string""#,
            "null",
        ];
        for text in texts {
            let expected: Value = serde_json::from_str(text).unwrap();
            assert_eq!(p(text), Some(expected), "{text}");
            let mut inc = PartialJson::new();
            inc.push(text);
            assert!(inc.is_complete() && inc.error().is_none(), "{text}");
        }
    }

    #[test]
    fn chunked_equals_whole_for_every_split() {
        let text = r#"{"a": "x\\y\u00e9😀", "b": [1, -2.5e-3, true, null], "c": {"d": "e"}}"#;
        for cut in 0..=text.len() {
            let (Some(left), Some(right)) = (text.get(..cut), text.get(cut..)) else {
                continue;
            };
            let mut inc = PartialJson::new();
            inc.push(left);
            assert_eq!(inc.value(), p(left), "prefix {left:?}");
            inc.push(right);
            assert_eq!(inc.value(), p(text));
        }
    }

    #[test]
    fn invalid_input_keeps_the_valid_prefix_and_reports() {
        let mut inc = PartialJson::new();
        inc.push("[1, 2, x, 3]");
        assert_eq!(inc.value(), Some(json!([1, 2])));
        let err = inc.error().cloned();
        assert!(
            matches!(err, Some(PartialJsonError::Unexpected { offset: 7, .. })),
            "{err:?}"
        );
        inc.push("more");
        assert_eq!(inc.value(), Some(json!([1, 2])));
        for bad in [
            "[01]",
            "[1.]",
            "{\"a\" 1}",
            "[1}",
            "{1: 2}",
            "\"a\nb\"",
            "[\"\\q\"]",
            "[1e400]",
        ] {
            let mut inc = PartialJson::new();
            inc.push(bad);
            assert!(inc.error().is_some(), "{bad}");
            assert!(serde_json::from_str::<Value>(bad).is_err(), "{bad}");
        }
        let mut inc = PartialJson::new();
        inc.push("{} x");
        assert_eq!(inc.value(), Some(json!({})));
        assert!(inc.error().is_some());
    }

    #[test]
    fn nesting_limit_matches_serde_json() {
        let ok = format!("{}{}", "[".repeat(127), "]".repeat(127));
        assert!(serde_json::from_str::<Value>(&ok).is_ok());
        let mut inc = PartialJson::new();
        inc.push(&ok);
        assert!(inc.error().is_none());
        assert_eq!(inc.value(), serde_json::from_str(&ok).ok());
        let deep = "[".repeat(100_000);
        let mut inc = PartialJson::new();
        inc.push(&deep);
        assert!(matches!(
            inc.error(),
            Some(PartialJsonError::TooDeep { offset: 127 })
        ));
        assert_eq!(inc.value().map(|v| v.is_array()), Some(true));
    }
}
