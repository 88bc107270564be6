//! Word wrapping by an estimated glyph width (0.6 em), honouring explicit newlines: the web
//! demo's `wrapText`, so a label breaks at the same words in an export as in the room.

/// Average glyph width in ems.
pub const GLYPH_EM: f64 = 0.6;
/// Line advance in ems after the first line.
pub const LINE_EM: f64 = 1.3;

/// The lines of `text` wrapped at `max_width` px for glyphs of `font_size` px; no wrapping
/// without a width. A word longer than a line stands alone on its line.
pub fn wrap(text: &str, font_size: f64, max_width: Option<f64>) -> Vec<String> {
    let per_line = match max_width {
        Some(w) if font_size > 0.0 => ((w / (font_size * GLYPH_EM)).floor() as usize).max(1),
        _ => usize::MAX,
    };
    let mut lines = Vec::new();
    for para in text.split('\n') {
        let mut line = String::new();
        let mut count = 0usize;
        for word in para.split(' ') {
            let len = word.chars().count();
            if line.is_empty() && count == 0 {
                line.push_str(word);
                count = len;
            } else if count + 1 + len <= per_line {
                line.push(' ');
                line.push_str(word);
                count += 1 + len;
            } else {
                lines.push(std::mem::take(&mut line));
                line.push_str(word);
                count = len;
            }
        }
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_words_and_newlines() {
        // 10 px glyphs at 0.6 em: 6 px each, 30 px = 5 characters a line.
        assert_eq!(wrap("ab cd ef", 10.0, Some(30.0)), ["ab cd", "ef"]);
        assert_eq!(wrap("a\nb", 10.0, None), ["a", "b"]);
        assert_eq!(wrap("longword x", 10.0, Some(30.0)), ["longword", "x"]);
        assert_eq!(wrap("", 10.0, Some(30.0)), [""]);
    }
}
