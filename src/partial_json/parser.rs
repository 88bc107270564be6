//! The incremental structural parser: a stack of open containers with their partly built values.
//!
//! Owns: JSON structure (objects, arrays, keys, commas, nesting limit), attaching each finished
//! value to its parent, and building snapshots of the values that are still open. State is kept
//! across chunks, so a chunk costs time proportional to its length; a snapshot costs the size of
//! the open values it includes. Must not touch: byte-level scalar scanning (`lexer`), prose and
//! fences (`fence`), or action events (`action_stream`), which observe finished values through
//! the [`Sink`] hook.

use serde_json::{Map, Value};

use super::PartialJsonError;
use super::lexer::{LitLexer, NumLexer, NumStep, StrLexer, number_value};

/// Deepest container nesting accepted: the same limit as `serde_json::from_str` (which fails on
/// the 128th nested container), and a bound on the recursion of `Value`'s clone and drop.
pub const MAX_DEPTH: usize = 127;

/// One open container and what it has received so far.
#[derive(Debug, Clone)]
pub(crate) enum Container {
    Array(Vec<Value>),
    Object {
        map: Map<String, Value>,
        /// The last finished key, waiting for (or receiving) its value.
        key: Option<String>,
    },
}

/// The scalar currently being scanned, if any.
#[derive(Debug, Clone)]
enum Token {
    None,
    /// A string; `key` when it is an object key (keys never show in snapshots).
    Str {
        lexer: StrLexer,
        key: bool,
    },
    /// A number; its text is in `Parser::num_text`.
    Num(NumLexer),
    Lit(LitLexer),
}

/// What the next structural byte may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A value (start of text, after `:` or after `,` in an array).
    Value,
    /// A value or `]` (just after `[`).
    ValueOrClose,
    /// A key or `}` (just after `{`).
    KeyOrClose,
    /// A key (after `,` in an object).
    Key,
    /// `:` after a key.
    Colon,
    /// `,` or the closing bracket of the innermost container.
    CommaOrClose,
    /// Only whitespace: the root value is finished.
    End,
}

/// Observes each finished value before it is attached to its parent; returning `None` keeps
/// it out of the parent (the action stream moves finished actions out this way, so it never
/// holds the whole actions array).
pub(crate) trait Sink {
    fn finished(&mut self, open: &[Container], value: Value) -> Option<Value>;
}

/// The sink that attaches everything (plain [`super::PartialJson`]).
pub(crate) struct KeepAll;

impl Sink for KeepAll {
    fn finished(&mut self, _open: &[Container], value: Value) -> Option<Value> {
        Some(value)
    }
}

/// Why `feed` returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fed {
    /// The whole chunk was consumed and the text may continue.
    All,
    /// The root value finished after this many bytes of the chunk (only with `stop_at_end`).
    RootDone(usize),
    /// The byte at this index of the chunk cannot continue the text; see `Parser::error`.
    Invalid(usize),
}

/// The parser state. Cheap to create; never panics on any input.
#[derive(Debug, Clone)]
pub(crate) struct Parser {
    stack: Vec<Container>,
    token: Token,
    expect: Expect,
    root: Option<Value>,
    /// Reused text buffer of the number being scanned.
    num_text: String,
    /// Bytes consumed so far, for error offsets.
    offset: usize,
    error: Option<PartialJsonError>,
    /// Bumped on every change visible in a snapshot (text appended, scalar finished, container
    /// or string value opened), never otherwise: equal versions mean equal snapshots.
    version: u64,
    /// Return as soon as the root value finishes instead of checking trailing whitespace.
    stop_at_end: bool,
}

impl Parser {
    /// A parser at the start of a text. With `stop_at_end`, `feed` stops right after the root
    /// value (the caller decides what follows) instead of rejecting trailing non-whitespace.
    pub fn new(stop_at_end: bool) -> Self {
        Self {
            stack: Vec::new(),
            token: Token::None,
            expect: Expect::Value,
            root: None,
            num_text: String::new(),
            offset: 0,
            error: None,
            version: 0,
            stop_at_end,
        }
    }

    /// The first error met; once set, input is ignored.
    pub fn error(&self) -> Option<&PartialJsonError> {
        self.error.as_ref()
    }

    /// The root value, once it is finished.
    pub fn root(&self) -> Option<&Value> {
        self.root.as_ref()
    }

    /// The open containers, outermost first.
    pub fn open(&self) -> &[Container] {
        &self.stack
    }

    /// See the field: equal versions mean equal snapshots.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Consumes `chunk`, calling `sink` for every finished value in order.
    pub fn feed<S: Sink>(&mut self, chunk: &str, sink: &mut S) -> Fed {
        if self.error.is_some() {
            return Fed::Invalid(0);
        }
        let fed = self.feed_inner(chunk, sink);
        let used = match fed {
            Fed::All => chunk.len(),
            Fed::RootDone(n) | Fed::Invalid(n) => n,
        };
        self.offset += used;
        fed
    }

    fn feed_inner<S: Sink>(&mut self, chunk: &str, sink: &mut S) -> Fed {
        let bytes = chunk.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let rest = chunk.get(i..).unwrap_or_default();
            match self.feed_token(rest, self.offset + i, sink) {
                Ok(Some(used)) => {
                    i += used;
                    continue;
                }
                Ok(None) => {}
                Err(e) => return self.fail(e),
            }
            let b = bytes.get(i).copied().unwrap_or_default();
            if matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                i += 1;
                continue;
            }
            if self.expect == Expect::End {
                if self.stop_at_end {
                    return Fed::RootDone(i);
                }
                return self.fail(self.unexpected(i, b, "end of text"));
            }
            if let Err(e) = self.structural(b, i, sink) {
                return self.fail(e);
            }
            i += 1;
            if self.stop_at_end && self.expect == Expect::End {
                return Fed::RootDone(i);
            }
        }
        Fed::All
    }

    fn fail(&mut self, e: PartialJsonError) -> Fed {
        let at = e.offset().saturating_sub(self.offset);
        self.error = Some(e);
        Fed::Invalid(at)
    }

    fn unexpected(&self, i: usize, b: u8, expected: &'static str) -> PartialJsonError {
        PartialJsonError::Unexpected {
            offset: self.offset + i,
            byte: b,
            expected,
        }
    }

    /// Continues the scalar in progress on `rest` (which starts at stream offset `base`);
    /// `Ok(Some(n))` when it used `n > 0` bytes, `Ok(None)` when no scalar is in progress.
    fn feed_token<S: Sink>(
        &mut self,
        rest: &str,
        base: usize,
        sink: &mut S,
    ) -> Result<Option<usize>, PartialJsonError> {
        match &mut self.token {
            Token::None => Ok(None),
            Token::Str { lexer, key } => {
                let step = lexer.feed(rest, base)?;
                let key = *key;
                if step.grew && !key {
                    self.version += 1;
                }
                if step.closed {
                    let text = std::mem::take(&mut lexer.buf);
                    self.token = Token::None;
                    if key {
                        if let Some(Container::Object { key, .. }) = self.stack.last_mut() {
                            *key = Some(text);
                        }
                        self.expect = Expect::Colon;
                    } else {
                        self.finish(Value::String(text), sink);
                    }
                }
                Ok(Some(step.consumed))
            }
            Token::Num(lexer) => match lexer.feed(rest.as_bytes(), &mut self.num_text, base)? {
                NumStep::NeedMore => Ok(Some(rest.len())),
                NumStep::Ended(used) => {
                    let value = number_value(&self.num_text, base + used)?;
                    self.token = Token::None;
                    self.version += 1;
                    self.finish(value, sink);
                    // `used` may be 0 (the number ended at a chunk boundary): report progress
                    // as `None` so the caller handles the ending byte structurally.
                    Ok((used > 0).then_some(used))
                }
            },
            Token::Lit(lexer) => match lexer.feed(rest.as_bytes(), base)? {
                None => Ok(Some(rest.len())),
                Some(used) => {
                    let value = lexer.value();
                    self.token = Token::None;
                    self.version += 1;
                    self.finish(value, sink);
                    Ok(Some(used))
                }
            },
        }
    }

    /// Handles one byte outside any scalar (whitespace already skipped).
    fn structural<S: Sink>(
        &mut self,
        b: u8,
        i: usize,
        sink: &mut S,
    ) -> Result<(), PartialJsonError> {
        match (self.expect, b) {
            (Expect::Value | Expect::ValueOrClose, _) if b != b']' => self.start_value(b, i),
            (Expect::ValueOrClose, b']') => self.close(b, i, sink),
            (Expect::KeyOrClose | Expect::Key, b'"') => {
                self.token = Token::Str {
                    lexer: StrLexer::new(),
                    key: true,
                };
                Ok(())
            }
            (Expect::KeyOrClose, b'}') => self.close(b, i, sink),
            (Expect::Colon, b':') => {
                self.expect = Expect::Value;
                Ok(())
            }
            (Expect::CommaOrClose, b',') => {
                self.expect = match self.stack.last() {
                    Some(Container::Object { .. }) => Expect::Key,
                    _ => Expect::Value,
                };
                Ok(())
            }
            (Expect::CommaOrClose, b']' | b'}') => self.close(b, i, sink),
            (expect, _) => Err(self.unexpected(i, b, expect.describe())),
        }
    }

    fn start_value(&mut self, b: u8, i: usize) -> Result<(), PartialJsonError> {
        match b {
            b'{' | b'[' => {
                if self.stack.len() >= MAX_DEPTH {
                    return Err(PartialJsonError::TooDeep {
                        offset: self.offset + i,
                    });
                }
                if b == b'{' {
                    self.stack.push(Container::Object {
                        map: Map::new(),
                        key: None,
                    });
                    self.expect = Expect::KeyOrClose;
                } else {
                    self.stack.push(Container::Array(Vec::new()));
                    self.expect = Expect::ValueOrClose;
                }
            }
            b'"' => {
                self.token = Token::Str {
                    lexer: StrLexer::new(),
                    key: false,
                };
            }
            _ => {
                if let Some(lexer) = NumLexer::start(b) {
                    self.num_text.clear();
                    self.num_text.push(b as char);
                    self.token = Token::Num(lexer);
                } else if let Some(lexer) = LitLexer::start(b) {
                    self.token = Token::Lit(lexer);
                } else {
                    return Err(self.unexpected(i, b, "a value"));
                }
                return Ok(());
            }
        }
        // A container or string value opened: the snapshot now shows `{}`, `[]` or `""`.
        self.version += 1;
        Ok(())
    }

    /// Closes the innermost container with `b` (`]` or `}`), which must match it.
    fn close<S: Sink>(&mut self, b: u8, i: usize, sink: &mut S) -> Result<(), PartialJsonError> {
        let value = match (self.stack.pop(), b) {
            (Some(Container::Array(items)), b']') => Value::Array(items),
            (Some(Container::Object { map, .. }), b'}') => Value::Object(map),
            (other, _) => {
                if let Some(container) = other {
                    self.stack.push(container);
                }
                return Err(self.unexpected(i, b, self.expect.describe()));
            }
        };
        // No version bump: the closed container was already visible in full.
        self.finish(value, sink);
        Ok(())
    }

    /// Attaches a finished value to its parent (or makes it the root).
    fn finish<S: Sink>(&mut self, value: Value, sink: &mut S) {
        self.expect = if self.stack.is_empty() {
            Expect::End
        } else {
            Expect::CommaOrClose
        };
        let Some(value) = sink.finished(&self.stack, value) else {
            if let Some(Container::Object { key, .. }) = self.stack.last_mut() {
                *key = None;
            }
            return;
        };
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Container::Array(items)) => items.push(value),
            Some(Container::Object { map, key }) => {
                if let Some(key) = key.take() {
                    map.insert(key, value);
                }
            }
        }
    }

    /// The value of the open containers from `depth` inward (and of the scalar in progress),
    /// with the omission rules of [`super::parse_partial`]: `None` if nothing at that depth has
    /// started. Costs the size of those open values.
    pub fn snapshot_from(&self, depth: usize) -> Option<Value> {
        let mut child = self.token_value(depth);
        for container in self.stack.get(depth..)?.iter().rev() {
            child = Some(match container {
                Container::Array(items) => {
                    let mut items = items.clone();
                    items.extend(child);
                    Value::Array(items)
                }
                Container::Object { map, key } => {
                    let mut map = map.clone();
                    if let (Some(key), Some(child)) = (key, child) {
                        map.insert(key.clone(), child);
                    }
                    Value::Object(map)
                }
            });
        }
        child
    }

    /// The visible value of the scalar in progress: a value string's decoded prefix, or a
    /// number when it is the whole text at `depth` 0 (nothing after it can be inside a container).
    fn token_value(&self, depth: usize) -> Option<Value> {
        match &self.token {
            Token::Str { lexer, key: false } => Some(Value::String(lexer.buf.clone())),
            Token::Num(lexer) if self.stack.is_empty() && depth == 0 => {
                lexer.value_if_ended(&self.num_text)
            }
            _ => None,
        }
    }

    /// When the scalar in progress is a string value (its snapshot shows only a prefix of
    /// it), the key of the object member holding it, directly or through arrays.
    pub fn open_string_key(&self) -> Option<&str> {
        if !matches!(self.token, Token::Str { key: false, .. }) {
            return None;
        }
        self.stack.iter().rev().find_map(|c| match c {
            Container::Array(_) => None,
            Container::Object { key, .. } => Some(key.as_deref()),
        })?
    }

    /// The best value of everything received: the finished root or a snapshot.
    pub fn value(&self) -> Option<Value> {
        match &self.root {
            Some(root) => Some(root.clone()),
            None => self.snapshot_from(0),
        }
    }
}

impl Expect {
    fn describe(self) -> &'static str {
        match self {
            Self::Value => "a value",
            Self::ValueOrClose => "a value or ']'",
            Self::KeyOrClose => "a string key or '}'",
            Self::Key => "a string key",
            Self::Colon => "':'",
            Self::CommaOrClose => "',' or a closing bracket",
            Self::End => "end of text",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Feeds `text` byte by byte: the version changes exactly when the snapshot does.
    #[test]
    fn version_changes_exactly_when_the_snapshot_changes() {
        let text = r#"{"a": [1, "x\ty", {"b": null}, []], "c": "", "d": {"e": tru"#;
        let mut parser = Parser::new(false);
        let mut last = (parser.version(), parser.value());
        for i in 0..text.len() {
            parser.feed(&text[i..=i], &mut KeepAll);
            let now = (parser.version(), parser.value());
            assert_eq!(now.0 != last.0, now.1 != last.1, "after {:?}", &text[..=i]);
            last = now;
        }
        assert!(parser.error().is_none());
    }

    /// A sink that keeps depth-1 values out of their parent.
    struct TakeDepthOne(Vec<Value>);

    impl Sink for TakeDepthOne {
        fn finished(&mut self, open: &[Container], value: Value) -> Option<Value> {
            if open.len() == 1 {
                self.0.push(value);
                return None;
            }
            Some(value)
        }
    }

    #[test]
    fn a_sink_can_move_finished_values_out() {
        let mut parser = Parser::new(true);
        let mut sink = TakeDepthOne(Vec::new());
        assert_eq!(
            parser.feed(r#"[{"a": 1}, "s", 2] tail"#, &mut sink),
            Fed::RootDone(18)
        );
        assert_eq!(sink.0, vec![json!({"a": 1}), json!("s"), json!(2)]);
        assert_eq!(parser.root(), Some(&json!([])));
    }

    #[test]
    fn snapshot_from_a_depth_skips_the_outer_containers() {
        let mut parser = Parser::new(false);
        parser.feed(r#"{"actions": [{"_type": "cre"#, &mut KeepAll);
        assert_eq!(parser.snapshot_from(2), Some(json!({"_type": "cre"})));
        assert_eq!(parser.snapshot_from(3), Some(json!("cre")));
        assert_eq!(parser.snapshot_from(4), None);
    }

    #[test]
    fn errors_report_the_offset_in_the_whole_text() {
        let mut parser = Parser::new(false);
        assert_eq!(parser.feed("[1, ", &mut KeepAll), Fed::All);
        assert_eq!(parser.feed(" ]", &mut KeepAll), Fed::Invalid(1));
        assert_eq!(parser.error().map(PartialJsonError::offset), Some(5));
        assert_eq!(parser.feed("2]", &mut KeepAll), Fed::Invalid(0));
    }
}
