//! Incremental partial-JSON parser and the streamed action splitter.
//!
//! Owns: turning a growing JSON text (a language model's response, chunk by chunk) into values,
//! and splitting a `{"actions": [...]}` response into per-action events while it streams. Pure:
//! no I/O, no async, no knowledge of what an action means (that is `agent`'s job).
//!
//! # Layout
//! - `lexer`: scalar tokens (strings with escapes, numbers, literals) cut anywhere.
//! - `parser`: the structural state machine, a stack of open containers with their partly built
//!   values; snapshots of the open values.
//! - `partial`: [`PartialJson`] and [`parse_partial`], the value-level API.
//! - `fence`: skipping prose and Markdown code fences before the JSON.
//! - `action_stream`: [`ActionStream`], per-action incomplete/complete events.
//!
//! # Omission rules
//! A snapshot only contains what is final, except the last open string, which is a prefix of
//! its final value: unclosed arrays and objects are closed; a number, `true`/`false`/`null` or
//! object key still incomplete at the end of the text is omitted (so is a key whose value has not
//! started); a dangling escape (`\`, `\u12`, a leading surrogate awaiting its pair) is dropped.
//! The one exception is a number that is the whole text (`12`): the end of the text ends it, as
//! `serde_json::from_str` would, so a complete text always parses exactly like `serde_json`.
//!
//! # Invalid input
//! The API is error-free at the call site: at the first byte that cannot continue a JSON text
//! (or trailing non-whitespace after the root value), the parser stops consuming, keeps the value
//! of the valid prefix, and reports the problem through `error()`. Nothing panics, whatever the
//! input; nesting deeper than [`MAX_DEPTH`] is an error, as in `serde_json`.

mod action_stream;
mod fence;
mod lexer;
mod parser;
mod partial;

pub use action_stream::{ACTIONS_PREFILL, ActionStream, StreamedAction};
pub use parser::MAX_DEPTH;
pub use partial::{PartialJson, parse_partial};

/// Why a text stopped being a valid JSON prefix. Offsets count bytes from the start of the
/// text given to the parser (for [`ActionStream`], from the start of the JSON it found).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartialJsonError {
    /// A byte that cannot appear here.
    #[error("unexpected byte 0x{byte:02x} at offset {offset}, expected {expected}")]
    Unexpected {
        offset: usize,
        byte: u8,
        expected: &'static str,
    },
    /// A raw control character (U+0000 to U+001F) inside a string.
    #[error("control character in string at offset {offset}")]
    ControlCharacter { offset: usize },
    /// A backslash followed by something other than a JSON escape, or a bad hex digit.
    #[error("invalid escape at offset {offset}")]
    InvalidEscape { offset: usize },
    /// A `\u` surrogate without its pair (JSON text must encode valid Unicode).
    #[error("unpaired surrogate in unicode escape at offset {offset}")]
    LoneSurrogate { offset: usize },
    /// A byte that breaks the number grammar (`01`, `1.`, `-x`, `2e]`).
    #[error("invalid number at offset {offset}")]
    InvalidNumber { offset: usize },
    /// A number too large for an `f64` (`1e400`).
    #[error("number out of range at offset {offset}")]
    NumberOutOfRange { offset: usize },
    /// A misspelt `true`, `false` or `null`.
    #[error("invalid literal at offset {offset}")]
    InvalidLiteral { offset: usize },
    /// More than [`MAX_DEPTH`] nested containers.
    #[error("nesting deeper than {MAX_DEPTH} at offset {offset}")]
    TooDeep { offset: usize },
}

impl PartialJsonError {
    /// The byte offset of the offending byte.
    pub fn offset(&self) -> usize {
        match *self {
            Self::Unexpected { offset, .. }
            | Self::ControlCharacter { offset }
            | Self::InvalidEscape { offset }
            | Self::LoneSurrogate { offset }
            | Self::InvalidNumber { offset }
            | Self::NumberOutOfRange { offset }
            | Self::InvalidLiteral { offset }
            | Self::TooDeep { offset } => offset,
        }
    }
}
