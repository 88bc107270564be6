//! Skipping what a model writes before its JSON: prose and Markdown code-fence openers.
//!
//! Owns: finding the byte where a candidate JSON object starts (`{`), across chunks. A fence
//! opener (three or more backticks or tildes at the start of a line) and its info string
//! (```` ```json ````) are skipped whole, so braces in an info string are never taken for JSON.
//! Must not touch: JSON parsing; a candidate that turns out not to be the actions object is
//! rejected by `action_stream`, which then resumes scanning here.

/// The scanner state, kept across chunks.
#[derive(Debug, Clone)]
pub(crate) struct Prelude {
    /// Only spaces seen since the last newline (or the start).
    at_line_start: bool,
    /// The fence character being counted at line start, and how many in a row.
    run: Option<(u8, u8)>,
    /// Inside a fence opener's info string: skip to the end of the line.
    in_info: bool,
}

impl Default for Prelude {
    fn default() -> Self {
        Self {
            at_line_start: true,
            run: None,
            in_info: false,
        }
    }
}

impl Prelude {
    /// The index in `text` of the first `{` that may start the JSON, consuming everything
    /// before it; `None` if `text` holds none (it was all prose).
    pub fn find_start(&mut self, text: &str) -> Option<usize> {
        for (i, &b) in text.as_bytes().iter().enumerate() {
            if self.in_info {
                if b == b'\n' {
                    self.in_info = false;
                    self.at_line_start = true;
                }
                continue;
            }
            if self.at_line_start && (b == b'`' || b == b'~') {
                match self.run {
                    Some((c, n)) if c == b => {
                        self.run = Some((c, n.saturating_add(1)));
                        if n + 1 >= 3 {
                            self.in_info = true;
                            self.run = None;
                            self.at_line_start = false;
                        }
                        continue;
                    }
                    Some(_) => {}
                    None => {
                        self.run = Some((b, 1));
                        continue;
                    }
                }
            }
            self.run = None;
            if b == b'{' {
                self.at_line_start = false;
                return Some(i);
            }
            self.at_line_start = b == b'\n' || (self.at_line_start && b == b' ');
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(parts: &[&str]) -> Option<(usize, usize)> {
        let mut prelude = Prelude::default();
        for (n, part) in parts.iter().enumerate() {
            if let Some(i) = prelude.find_start(part) {
                return Some((n, i));
            }
        }
        None
    }

    #[test]
    fn finds_the_first_brace_after_prose() {
        assert_eq!(
            find(&["Sure! Here is the plan:\n{\"actions\""]),
            Some((0, 24))
        );
        assert_eq!(find(&["{"]), Some((0, 0)));
        assert_eq!(find(&["no json here", " at all"]), None);
    }

    #[test]
    fn skips_a_fence_info_string_even_across_chunks() {
        assert_eq!(find(&["```json {not this}\n{"]), Some((0, 19)));
        assert_eq!(find(&["`", "``js", "on {x}", "\n", " {"]), Some((4, 1)));
        assert_eq!(find(&["text\n  ~~~ {\n{"]), Some((0, 13)));
    }

    #[test]
    fn inline_backticks_are_prose() {
        // Fewer than three backticks, or not at line start: not a fence.
        assert_eq!(find(&["use `x` {"]), Some((0, 8)));
        assert_eq!(find(&["``{"]), Some((0, 2)));
        assert_eq!(find(&["a ```b {"]), Some((0, 7)));
    }
}
