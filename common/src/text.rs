//! Dataset-controlled strings (sample keys, field names, tar entry names)
//! made safe to print: a key holding a newline must not forge a line of
//! `tributary read`'s output, nor an escape sequence drive the terminal.

use std::borrow::Cow;

/// `text` with backslashes and control characters escaped as Rust writes
/// them (`\\`, `\n`, `\t`, `\r`, `\u{1b}`...), so it prints as one line;
/// other characters, quotes and non-ASCII letters included, are kept.
/// Borrowed when there is nothing to escape (the usual key).
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    // Line and paragraph separators end a line in some terminals and editors.
    c == '\\' || c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_and_backslashes_are_escaped_and_the_rest_kept() {
        assert!(matches!(
            printable("n01/000123"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(printable("a\nb\tc\r\u{1b}[31m"), "a\\nb\\tc\\r\\u{1b}[31m");
        assert_eq!(printable("back\\slash"), "back\\\\slash");
        assert_eq!(printable("l'été \"ok\""), "l'été \"ok\"");
        assert_eq!(printable("\u{7f}\u{85}\u{2028}"), "\\u{7f}\\u{85}\\u{2028}");
        assert!(!printable("x\ny\u{2029}z").contains(['\n', '\u{2029}']));
    }
}
