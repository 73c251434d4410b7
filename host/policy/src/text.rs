//! How text that came from a plugin is shown to a person: one rule for
//! tables, the CLI's `error:` line and the host's log lines. Control
//! characters (C0, DEL, C1: escape sequences, carriage returns, bells) and
//! the Unicode characters that reorder, break or hide text (bidi marks,
//! overrides and isolates, the line and paragraph separators U+2028 and
//! U+2029, zero-width and other invisible characters, tag characters) are
//! shown escaped (`\x1b`, `\u{202e}`),
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

/// Whether `c` is a character a person cannot see as itself: a control,
/// or a Unicode character that reorders, breaks or hides text.
#[must_use]
pub fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00ad}' // soft hyphen
            | '\u{034f}' // combining grapheme joiner
            | '\u{061c}' // Arabic letter mark (bidi)
            | '\u{115f}' | '\u{1160}' | '\u{3164}' | '\u{ffa0}' // Hangul fillers
            | '\u{17b4}' | '\u{17b5}' // Khmer inherent vowels (invisible)
            | '\u{180b}'..='\u{180f}' // Mongolian selectors and vowel separator
            | '\u{200b}'..='\u{200f}' // zero-width space, joiners, LRM/RLM
            | '\u{2028}' | '\u{2029}' // line and paragraph separators
            | '\u{202a}'..='\u{202e}' // bidi embeddings and overrides
            | '\u{2060}'..='\u{206f}' // word joiner, invisible operators, bidi isolates, deprecated format controls
            | '\u{feff}' // zero-width no-break space
            | '\u{fff9}'..='\u{fffb}' // interlinear annotation
            | '\u{1d173}'..='\u{1d17a}' // musical format controls
            | '\u{e0000}'..='\u{e007f}' // tag characters
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

/// `s` as a TOML basic string (with its quotes) that carries no hidden
/// character raw: controls and every [`hidden`] character are written as
/// `\uXXXX` / `\UXXXXXXXX` escapes, so a manifest read in an editor or a
/// terminal shows exactly what it grants (a U+2028 in a value can neither
/// start what looks like a new line nor reorder the text around it).
#[must_use]
pub fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if hidden(c) => {
                if (c as u32) <= 0xffff {
                    let _ = write!(out, "\\u{:04X}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08X}", c as u32);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `s` for a TOML comment (after `# `): one line, every [`hidden`]
/// character shown escaped as on a terminal, at most [`LINE_CHARS`].
#[must_use]
pub fn comment(s: &str) -> Cow<'_, str> {
    line(s)
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
            ("a\u{2028}b\u{2029}c", "a\\u{2028}b\\u{2029}c"),
            ("x\u{2066}y\u{2069}\u{061c}", "x\\u{2066}y\\u{2069}\\u{61c}"),
            ("tag\u{e0041}", "tag\\u{e0041}"),
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

    #[test]
    fn toml_strings_and_comments_carry_no_hidden_character_raw() {
        for raw in [
            "plain",
            "quote \" and \\ backslash",
            "line\u{2028}sep\u{2029}para",
            "bidi\u{202e}txt.exe\u{2066}",
            "ctl\x1b[2J\r\n\t\x7f",
            "tag\u{e0041}",
            "東京 ñ",
        ] {
            let quoted = toml_string(raw);
            assert!(!quoted.chars().any(hidden), "{quoted:?}");
            let parsed: toml::Table = format!("v = {quoted}").parse().unwrap();
            assert_eq!(parsed["v"].as_str(), Some(raw), "{quoted}");
            let c = comment(raw);
            assert!(!c.chars().any(hidden), "{c:?}");
        }
        assert_eq!(toml_string("a\u{2028}b"), "\"a\\u2028b\"");
    }
}
