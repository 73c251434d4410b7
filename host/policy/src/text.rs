//! How text that came from a plugin is shown to a person: one rule for
//! tables, the CLI's `error:` line and the host's log lines. Control
//! characters (C0, DEL, C1: escape sequences, carriage returns, bells) and
//! the Unicode controls that reorder or hide text (bidi overrides and
//! isolates, zero-width characters) are shown escaped (`\x1b`, `\u{202e}`),
//! so a plugin can neither move the cursor, clear the screen, write the
//! clipboard (OSC 52) nor make one value look like another; very long
//! values are cut with a marker. JSON output is not passed through here: it
//! stays exact (JSON escapes control characters itself).

use std::borrow::Cow;
use std::fmt::Write;

/// Longest value a table cell shows, in characters.
pub const CELL_CHARS: usize = 256;
/// Longest message a log line or an `error:` line shows, in characters.
pub const LINE_CHARS: usize = 4096;

fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200b}'..='\u{200f}' // zero-width space, joiners, LRM/RLM
            | '\u{202a}'..='\u{202e}' // bidi embeddings and overrides
            | '\u{2060}'..='\u{2064}' // word joiner, invisible operators
            | '\u{2066}'..='\u{2069}' // bidi isolates
            | '\u{feff}' // zero-width no-break space
        )
}

/// `s` safe for a terminal: hidden characters escaped, at most `max`
/// characters kept (then `…[+N chars]`). Borrowed when nothing changed.
#[must_use]
pub fn for_terminal(s: &str, max: usize) -> Cow<'_, str> {
    let long = s.len() > max && s.chars().nth(max).is_some();
    if !long && !s.chars().any(hidden) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len().min(max * 4) + 16);
    let mut chars = s.chars();
    for c in chars.by_ref().take(max) {
        if !hidden(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    let rest = chars.count();
    if rest > 0 {
        let _ = write!(out, "…[+{rest} chars]");
    }
    Cow::Owned(out)
}

/// [`for_terminal`] with the length of a table cell.
#[must_use]
pub fn cell(s: &str) -> Cow<'_, str> {
    for_terminal(s, CELL_CHARS)
}

/// [`for_terminal`] with the length of a log or error line.
#[must_use]
pub fn line(s: &str) -> Cow<'_, str> {
    for_terminal(s, LINE_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_as_it_is() {
        assert!(matches!(
            cell("i-0abc hetzner fsn1 ñ 東京"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn escapes_and_controls_are_shown_not_obeyed() {
        for (raw, shown) in [
            ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),
            ("\x1b]52;c;aGVsbG8=\x07", "\\x1b]52;c;aGVsbG8=\\x07"),
            ("ok\rEVIL", "ok\\x0dEVIL"),
            ("a\nb\tc", "a\\x0ab\\x09c"),
            ("\u{9b}31m", "\\u{9b}31m"),
            ("file\u{202e}fdp.exe", "file\\u{202e}fdp.exe"),
            ("a\u{200b}b", "a\\u{200b}b"),
            ("\x7f", "\\x7f"),
        ] {
            assert_eq!(cell(raw), shown, "{raw:?}");
        }
    }

    #[test]
    fn long_values_are_cut_with_a_marker() {
        let long = "x".repeat(72 << 10);
        let c = cell(&long);
        assert!(c.starts_with(&"x".repeat(CELL_CHARS)));
        assert!(
            c.ends_with(&format!("…[+{} chars]", (72 << 10) - CELL_CHARS)),
            "{c}"
        );
        assert_eq!(cell(&"y".repeat(CELL_CHARS)), "y".repeat(CELL_CHARS));
    }
}
