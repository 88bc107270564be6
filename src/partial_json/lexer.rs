//! Scalar tokens scanned incrementally: strings (with escapes), numbers and literals.
//!
//! Owns: the byte-level state machines of one JSON scalar that may be cut anywhere by a chunk
//! boundary. Each `feed` consumes as much of the chunk as belongs to the token and says where it
//! stopped. Must not touch: containers, keys vs values, or building the document (`parser`).
//! Every rule matches `serde_json::from_str` (escapes, paired surrogates, number grammar).

use serde_json::{Number, Value};

use super::PartialJsonError;

/// What a string lexer did with a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StrStep {
    /// Bytes of the chunk consumed (including the closing quote when `closed`).
    pub consumed: usize,
    /// The closing quote was consumed: the string is final.
    pub closed: bool,
    /// Decoded text was appended, so a snapshot containing this string changed.
    pub grew: bool,
}

/// Where a string stands inside an escape sequence. Nothing of a pending escape is in the
/// buffer yet, which is how a dangling `\` or `\u12` is dropped from snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    /// After `\`.
    Backslash,
    /// Inside `\uXXXX`: `digits` hex digits read so far; `high` is a leading surrogate that this
    /// escape must complete.
    Unicode {
        high: Option<u16>,
        digits: u8,
        code: u16,
    },
    /// A leading surrogate was read; `\` must follow.
    AfterHigh(u16),
    /// A leading surrogate then `\` were read; `u` must follow.
    AfterHighBackslash(u16),
}

/// A string being scanned: its decoded prefix and the escape state.
#[derive(Debug, Clone)]
pub(crate) struct StrLexer {
    /// Decoded text so far (dangling escapes excluded).
    pub buf: String,
    escape: Escape,
}

impl StrLexer {
    /// Starts a string just after its opening quote.
    pub fn new() -> Self {
        Self {
            buf: String::new(),
            escape: Escape::None,
        }
    }

    /// Consumes `chunk` up to and including the closing quote. `base` is the stream offset of
    /// `chunk[0]`, used only in errors. On error nothing is consumed past the bad byte.
    pub fn feed(&mut self, chunk: &str, base: usize) -> Result<StrStep, PartialJsonError> {
        let bytes = chunk.as_bytes();
        let mut i = 0;
        let mut grew = false;
        while i < bytes.len() {
            if self.escape == Escape::None {
                let run = bytes
                    .get(i..)
                    .unwrap_or_default()
                    .iter()
                    .position(|&b| b == b'"' || b == b'\\' || b < 0x20);
                let end = run.map_or(bytes.len(), |n| i + n);
                if end > i {
                    // `i` and `end` sit on ASCII bytes or the chunk ends: char boundaries.
                    if let Some(text) = chunk.get(i..end) {
                        self.buf.push_str(text);
                        grew = true;
                    }
                }
                i = end;
                match bytes.get(i) {
                    None => break,
                    Some(b'"') => {
                        return Ok(StrStep {
                            consumed: i + 1,
                            closed: true,
                            grew,
                        });
                    }
                    Some(b'\\') => self.escape = Escape::Backslash,
                    Some(_) => return Err(PartialJsonError::ControlCharacter { offset: base + i }),
                }
                i += 1;
                continue;
            }
            let b = bytes.get(i).copied().unwrap_or_default();
            grew |= self.escape_byte(b, base + i)?;
            i += 1;
        }
        Ok(StrStep {
            consumed: bytes.len(),
            closed: false,
            grew,
        })
    }

    /// Advances the escape state by one byte; returns whether a character was appended.
    fn escape_byte(&mut self, b: u8, offset: usize) -> Result<bool, PartialJsonError> {
        let invalid = PartialJsonError::InvalidEscape { offset };
        match self.escape {
            Escape::None => Ok(false),
            Escape::Backslash => {
                let c = match b {
                    b'"' => '"',
                    b'\\' => '\\',
                    b'/' => '/',
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'n' => '\n',
                    b'r' => '\r',
                    b't' => '\t',
                    b'u' => {
                        self.escape = Escape::Unicode {
                            high: None,
                            digits: 0,
                            code: 0,
                        };
                        return Ok(false);
                    }
                    _ => return Err(invalid),
                };
                self.buf.push(c);
                self.escape = Escape::None;
                Ok(true)
            }
            Escape::Unicode { high, digits, code } => {
                let digit = (b as char).to_digit(16).ok_or(invalid)?;
                let code = code << 4 | digit as u16;
                if digits < 3 {
                    self.escape = Escape::Unicode {
                        high,
                        digits: digits + 1,
                        code,
                    };
                    return Ok(false);
                }
                self.finish_unicode(high, code, offset)
            }
            Escape::AfterHigh(high) if b == b'\\' => {
                self.escape = Escape::AfterHighBackslash(high);
                Ok(false)
            }
            Escape::AfterHighBackslash(high) if b == b'u' => {
                self.escape = Escape::Unicode {
                    high: Some(high),
                    digits: 0,
                    code: 0,
                };
                Ok(false)
            }
            Escape::AfterHigh(_) | Escape::AfterHighBackslash(_) => {
                Err(PartialJsonError::LoneSurrogate { offset })
            }
        }
    }

    /// A full `\uXXXX` was read: append its character or wait for the trailing surrogate.
    fn finish_unicode(
        &mut self,
        high: Option<u16>,
        code: u16,
        offset: usize,
    ) -> Result<bool, PartialJsonError> {
        let lone = PartialJsonError::LoneSurrogate { offset };
        let is_low = (0xDC00..=0xDFFF).contains(&code);
        let scalar = match high {
            Some(high) if is_low => {
                0x1_0000 + ((u32::from(high) - 0xD800) << 10 | (u32::from(code) - 0xDC00))
            }
            Some(_) => return Err(lone),
            None if is_low => return Err(lone),
            None if (0xD800..=0xDBFF).contains(&code) => {
                self.escape = Escape::AfterHigh(code);
                return Ok(false);
            }
            None => u32::from(code),
        };
        let c = char::from_u32(scalar).ok_or(lone)?;
        self.buf.push(c);
        self.escape = Escape::None;
        Ok(true)
    }
}

/// Positions in the JSON number grammar `-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumState {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
}

impl NumState {
    /// Whether the text so far is a whole number (it could still grow).
    fn is_valid_end(self) -> bool {
        matches!(self, Self::Zero | Self::Int | Self::Frac | Self::ExpDigits)
    }

    /// The next state on `b`, or `None` if `b` does not extend the number.
    fn next(self, b: u8) -> Option<Self> {
        use NumState::*;
        match (self, b) {
            (Minus, b'0') => Some(Zero),
            (Minus, b'1'..=b'9') => Some(Int),
            (Int, b'0'..=b'9') => Some(Int),
            (Zero | Int, b'.') => Some(Dot),
            (Dot | Frac, b'0'..=b'9') => Some(Frac),
            (Zero | Int | Frac, b'e' | b'E') => Some(Exp),
            (Exp, b'+' | b'-') => Some(ExpSign),
            (Exp | ExpSign | ExpDigits, b'0'..=b'9') => Some(ExpDigits),
            _ => None,
        }
    }
}

/// What a number lexer did with a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumStep {
    /// The whole chunk extended the number; it may continue in the next chunk.
    NeedMore,
    /// A byte at this index ends the number (not consumed): the number is final.
    Ended(usize),
}

/// A number being scanned. Its text lives in a buffer owned by the parser (reused, so numbers
/// do not allocate); the value is produced by `serde_json::Number::from_str` so that every number
/// is exactly what `serde_json` would produce.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NumLexer {
    state: NumState,
}

impl NumLexer {
    /// Starts a number at its first byte (`-` or a digit), already pushed to `text` by the caller.
    pub fn start(first: u8) -> Option<Self> {
        let state = match first {
            b'-' => NumState::Minus,
            b'0' => NumState::Zero,
            b'1'..=b'9' => NumState::Int,
            _ => return None,
        };
        Some(Self { state })
    }

    /// Consumes the bytes of `chunk` that extend the number into `text`. An ending byte that
    /// arrives when the number is incomplete (`1.`, `-`, `2e+`) or a digit after a leading zero
    /// is an error at that byte.
    pub fn feed(
        &mut self,
        chunk: &[u8],
        text: &mut String,
        base: usize,
    ) -> Result<NumStep, PartialJsonError> {
        for (i, &b) in chunk.iter().enumerate() {
            match self.state.next(b) {
                Some(next) => {
                    self.state = next;
                    text.push(b as char);
                }
                None if self.state.is_valid_end() && !b.is_ascii_digit() => {
                    return Ok(NumStep::Ended(i));
                }
                None => return Err(PartialJsonError::InvalidNumber { offset: base + i }),
            }
        }
        Ok(NumStep::NeedMore)
    }

    /// The number if `text` would be final here (used only for a top-level number at the end
    /// of the text, the one case where the end of the text ends a number).
    pub fn value_if_ended(&self, text: &str) -> Option<Value> {
        if self.state.is_valid_end() {
            text.parse::<Number>().ok().map(Value::Number)
        } else {
            None
        }
    }
}

/// Converts a finished number text exactly as `serde_json` does (out-of-range floats such as
/// `1e400` are errors there too).
pub(crate) fn number_value(text: &str, offset: usize) -> Result<Value, PartialJsonError> {
    text.parse::<Number>()
        .map(Value::Number)
        .map_err(|_| PartialJsonError::NumberOutOfRange { offset })
}

/// A `true`, `false` or `null` being matched byte by byte.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LitLexer {
    word: &'static [u8],
    matched: usize,
}

impl LitLexer {
    /// Starts a literal at its first byte, or `None` if no literal starts with it.
    pub fn start(first: u8) -> Option<Self> {
        let word: &'static [u8] = match first {
            b't' => b"true",
            b'f' => b"false",
            b'n' => b"null",
            _ => return None,
        };
        Some(Self { word, matched: 1 })
    }

    /// Consumes the bytes of `chunk` that continue the literal; `Ok(Some(n))` when it is
    /// complete after `n` bytes, `Ok(None)` when the chunk ran out first.
    pub fn feed(&mut self, chunk: &[u8], base: usize) -> Result<Option<usize>, PartialJsonError> {
        for (i, &b) in chunk.iter().enumerate() {
            if self.word.get(self.matched) != Some(&b) {
                return Err(PartialJsonError::InvalidLiteral { offset: base + i });
            }
            self.matched += 1;
            if self.matched == self.word.len() {
                return Ok(Some(i + 1));
            }
        }
        Ok(None)
    }

    /// The literal's value (only meaningful once complete).
    pub fn value(&self) -> Value {
        match self.word.first() {
            Some(b't') => Value::Bool(true),
            Some(b'f') => Value::Bool(false),
            _ => Value::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(parts: &[&str]) -> (String, Result<bool, PartialJsonError>) {
        let mut lx = StrLexer::new();
        let mut base = 0;
        for part in parts {
            match lx.feed(part, base) {
                Ok(step) if step.closed => return (lx.buf, Ok(true)),
                Ok(_) => base += part.len(),
                Err(e) => return (lx.buf, Err(e)),
            }
        }
        (lx.buf, Ok(false))
    }

    #[test]
    fn escapes_decode_across_chunk_boundaries() {
        let (buf, closed) = feed_all(&["a\\", "n\\u00", "e9\\\\", "\\\"x\""]);
        assert_eq!(buf, "a\né\\\"x");
        assert_eq!(closed, Ok(true));
    }

    #[test]
    fn dangling_escape_is_not_in_the_buffer() {
        assert_eq!(feed_all(&["ab\\"]).0, "ab");
        assert_eq!(feed_all(&["ab\\u12"]).0, "ab");
        assert_eq!(feed_all(&["ab\\ud83d"]).0, "ab");
        assert_eq!(feed_all(&["ab\\ud83d\\u"]).0, "ab");
    }

    #[test]
    fn surrogate_pairs_join_and_lone_ones_are_errors() {
        assert_eq!(feed_all(&["\\ud83d", "\\ude00\""]).0, "😀");
        assert!(matches!(
            feed_all(&["\\ude00"]).1,
            Err(PartialJsonError::LoneSurrogate { offset: 5 })
        ));
        assert!(matches!(
            feed_all(&["\\ud83dx"]).1,
            Err(PartialJsonError::LoneSurrogate { .. })
        ));
        assert!(matches!(
            feed_all(&["\\ud83d\\u0041"]).1,
            Err(PartialJsonError::LoneSurrogate { .. })
        ));
    }

    #[test]
    fn control_characters_and_bad_escapes_are_errors() {
        assert!(matches!(
            feed_all(&["a\nb"]).1,
            Err(PartialJsonError::ControlCharacter { offset: 1 })
        ));
        assert!(matches!(
            feed_all(&["\\x"]).1,
            Err(PartialJsonError::InvalidEscape { offset: 1 })
        ));
        assert!(matches!(
            feed_all(&["\\u12g4"]).1,
            Err(PartialJsonError::InvalidEscape { offset: 4 })
        ));
    }

    #[test]
    fn numbers_end_only_on_a_non_number_byte() {
        let mut text = String::from("-");
        let mut lx = NumLexer::start(b'-').unwrap();
        assert_eq!(lx.feed(b"12.5e", &mut text, 0), Ok(NumStep::NeedMore));
        assert_eq!(lx.value_if_ended(&text), None);
        assert_eq!(lx.feed(b"+3,", &mut text, 0), Ok(NumStep::Ended(2)));
        assert_eq!(text, "-12.5e+3");
        assert_eq!(number_value(&text, 0).unwrap(), serde_json::json!(-12500.0));
    }

    #[test]
    fn invalid_numbers_are_errors() {
        for (first, rest) in [(b'0', "1"), (b'-', "]"), (b'1', ".e"), (b'2', "e]")] {
            let mut text = String::from(first as char);
            let mut lx = NumLexer::start(first).unwrap();
            assert!(
                lx.feed(rest.as_bytes(), &mut text, 0).is_err(),
                "{first} {rest}"
            );
        }
        assert!(number_value("1e400", 0).is_err());
    }

    #[test]
    fn literals_match_exactly() {
        let mut lx = LitLexer::start(b'f').unwrap();
        assert_eq!(lx.feed(b"al", 0), Ok(None));
        assert_eq!(lx.feed(b"se]", 0), Ok(Some(2)));
        assert_eq!(lx.value(), Value::Bool(false));
        let mut lx = LitLexer::start(b'n').unwrap();
        assert!(lx.feed(b"ul1", 0).is_err());
        assert!(LitLexer::start(b'x').is_none());
    }
}
