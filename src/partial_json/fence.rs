//! Skipping what a model writes before its JSON: prose, inline reasoning blocks and Markdown
//! code-fence openers.
//!
//! Owns: finding the byte where a candidate JSON object starts (`{`), across chunks. A fence
//! opener (three or more backticks or tildes at the start of a line) and its info string
//! (```` ```json ````) are skipped whole, so braces in an info string are never taken for JSON.
//! A `<think>…</think>` block (the inline reasoning of Qwen3 or DeepSeek-R1 served by Ollama or
//! llama.cpp) is skipped whole too, braces and JSON objects inside it included; either tag may
//! be split across chunks. An unclosed block hides everything after it.
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
    /// Bytes of [`THINK_OPEN`] matched so far (outside a block).
    open_matched: usize,
    /// Inside a reasoning block: bytes of [`THINK_CLOSE`] matched so far.
    in_think: Option<usize>,
}

/// The tag that opens an inline reasoning block.
const THINK_OPEN: &[u8] = b"<think>";
/// The tag that closes it.
const THINK_CLOSE: &[u8] = b"</think>";

/// Advances a match of `tag` (neither tag repeats its first byte, so a mismatch restarts at 0,
/// or at 1 on the first byte).
fn advance(tag: &[u8], matched: usize, b: u8) -> usize {
    if tag.get(matched) == Some(&b) {
        matched + 1
    } else if tag.first() == Some(&b) {
        1
    } else {
        0
    }
}

impl Default for Prelude {
    fn default() -> Self {
        Self {
            at_line_start: true,
            run: None,
            in_info: false,
            open_matched: 0,
            in_think: None,
        }
    }
}

impl Prelude {
    /// The index in `text` of the first `{` that may start the JSON, consuming everything
    /// before it; `None` if `text` holds none (it was all prose).
    pub fn find_start(&mut self, text: &str) -> Option<usize> {
        for (i, &b) in text.as_bytes().iter().enumerate() {
            if let Some(matched) = self.in_think {
                let matched = advance(THINK_CLOSE, matched, b);
                if matched == THINK_CLOSE.len() {
                    self.in_think = None;
                    self.at_line_start = true;
                    self.run = None;
                } else {
                    self.in_think = Some(matched);
                }
                continue;
            }
            self.open_matched = advance(THINK_OPEN, self.open_matched, b);
            if self.open_matched == THINK_OPEN.len() {
                self.open_matched = 0;
                self.in_think = Some(0);
                self.in_info = false;
                continue;
            }
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
    fn think_blocks_are_skipped_whatever_they_hold() {
        assert_eq!(
            find(&["<think>{\"actions\": []}</think>\n{"]),
            Some((0, 31))
        );
        assert_eq!(find(&["<think>a {b} c</think>{"]), Some((0, 22)));
        assert_eq!(
            find(&["<think>no end {"]),
            None,
            "an unclosed block hides the rest"
        );
        assert_eq!(find(&["<thin", "k>{x}</th", "ink>", "{"]), Some((3, 0)));
        assert_eq!(
            find(&["<", "t", "hink>{", "}<", "/", "think>{"]),
            Some((5, 6))
        );
        // Not a tag: braces count.
        assert_eq!(find(&["<thinking {"]), Some((0, 10)));
        assert_eq!(find(&["<<think>{}</think>{"]), Some((0, 18)));
        // A fence inside a block is part of the block.
        assert_eq!(find(&["<think>\n```json {\n</think>\n{"]), Some((0, 27)));
    }

    /// Whatever the chunking, the same byte of the whole text is found.
    #[test]
    fn think_blocks_are_found_the_same_for_every_chunking() {
        let texts = [
            "<think>I could write {\"actions\": [{\"_type\": \"x\"}]} but</think>\n\n```json\n{\"actions\": []}",
            "Sure <think>{}{</think> <think>}</think>{",
            "<think></think>{",
        ];
        for text in texts {
            let whole = find(&[text]).map(|(_, i)| i);
            for size in 1..text.len() {
                let parts: Vec<&str> = text
                    .as_bytes()
                    .chunks(size)
                    .map(|c| std::str::from_utf8(c).unwrap_or_default())
                    .collect();
                let found = find(&parts)
                    .map(|(n, i)| parts[..n].iter().map(|p| p.len()).sum::<usize>() + i);
                assert_eq!(found, whole, "{text:?} in chunks of {size}");
            }
        }
    }

    #[test]
    fn inline_backticks_are_prose() {
        // Fewer than three backticks, or not at line start: not a fence.
        assert_eq!(find(&["use `x` {"]), Some((0, 8)));
        assert_eq!(find(&["``{"]), Some((0, 2)));
        assert_eq!(find(&["a ```b {"]), Some((0, 7)));
    }
}
