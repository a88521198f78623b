//! Where frames go. On a terminal with `--watch`, each frame is redrawn in
//! place (cursor home, lines cleared to their end, the rest of the screen
//! cleared), cut to the terminal's width and height, with the cursor hidden
//! until the screen is dropped. Elsewhere frames are printed one after the
//! other, plainly, separated by a blank line.

use std::collections::HashMap;
use std::io::{self, Write};

/// Hide the cursor, clear the screen.
const START: &str = "\x1b[?25l\x1b[2J";
/// Cursor to the top left corner.
const HOME: &str = "\x1b[H";
/// Clear to the end of the line.
const CLEAR_LINE: &str = "\x1b[K";
/// Clear from the cursor to the end of the screen.
const CLEAR_BELOW: &str = "\x1b[J";
/// Show the cursor again.
const SHOW_CURSOR: &str = "\x1b[?25h";

/// The terminal size used when neither the environment nor the terminal
/// says.
const DEFAULT_SIZE: (usize, usize) = (80, 24);
/// The largest width or height believed.
const MAX_SIDE: usize = 10_000;

/// A terminal size the user fixed with `COLUMNS` and `LINES` (either may
/// be missing), read once at the edge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SizeOverride {
    pub columns: Option<usize>,
    pub lines: Option<usize>,
}

impl SizeOverride {
    /// `COLUMNS` and `LINES` from `env`, when they are numbers from 1 to
    /// 10000 (anything else is ignored, as shells set them loosely).
    pub fn from_env(env: &HashMap<String, String>) -> Self {
        let side = |var: &str| {
            env.get(var)
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|v| (1..=MAX_SIDE).contains(v))
        };
        Self {
            columns: side("COLUMNS"),
            lines: side("LINES"),
        }
    }
}

/// The size of the terminal on standard output: (columns, rows).
#[allow(
    unsafe_code,
    reason = "TIOCGWINSZ is read with one ioctl; the block states its invariant"
)]
fn tty_size() -> Option<(usize, usize)> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which
    // points at a live, writable `winsize` owned by this frame; on a
    // descriptor that is not a terminal it fails and writes nothing.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &raw mut size) };
    (rc == 0 && size.ws_col > 0 && size.ws_row > 0)
        .then(|| (usize::from(size.ws_col), usize::from(size.ws_row)))
}

/// Where frames are written.
#[derive(Debug)]
pub struct Screen {
    /// Redraw in place (a terminal, watching).
    in_place: bool,
    /// Cut lines to the width (a terminal).
    terminal: bool,
    size: SizeOverride,
    /// Frames written so far.
    frames: u64,
}

impl Screen {
    /// A screen on standard output; `terminal` says whether it is one,
    /// `in_place` whether frames replace each other.
    pub fn new(terminal: bool, in_place: bool, size: SizeOverride) -> Self {
        Self {
            in_place: terminal && in_place,
            terminal,
            size,
            frames: 0,
        }
    }

    /// (columns, rows): the environment's, else the terminal's, else 80x24.
    fn size(&self) -> (usize, usize) {
        let tty = tty_size().unwrap_or(DEFAULT_SIZE);
        (
            self.size.columns.unwrap_or(tty.0),
            self.size.lines.unwrap_or(tty.1),
        )
    }

    /// Writes one frame of text lines.
    pub fn text(&mut self, lines: Vec<String>) -> io::Result<()> {
        let bytes = if self.terminal {
            let (width, height) = self.size();
            let lines = super::render::fit(lines, width);
            if self.in_place {
                // One row is left free: a newline on the last row would
                // scroll the frame.
                in_place(
                    &lines,
                    width,
                    height.saturating_sub(1).max(1),
                    self.frames == 0,
                )
            } else {
                plain(&lines, self.frames > 0)
            }
        } else {
            plain(&lines, self.frames > 0)
        };
        self.frames += 1;
        write(&bytes)
    }

    /// Writes one line (a JSON frame): never redrawn, never cut.
    pub fn line(&mut self, line: &str) -> io::Result<()> {
        self.frames += 1;
        write(&format!("{line}\n"))
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        if self.in_place && self.frames > 0 {
            let _ = write(SHOW_CURSOR);
        }
    }
}

fn write(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// A frame printed after the previous one.
fn plain(lines: &[String], separated: bool) -> String {
    let mut out = String::new();
    if separated {
        out.push('\n');
    }
    for line in lines {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A frame drawn over the previous one: at most `rows` lines of at most
/// `width` characters.
fn in_place(lines: &[String], width: usize, rows: usize, first: bool) -> String {
    let mut out = String::new();
    if first {
        out.push_str(START);
    }
    out.push_str(HOME);
    for line in lines.iter().take(rows) {
        out.push_str(line);
        // A full line leaves the cursor past the last column, where
        // clearing would erase the line's last character.
        if line.chars().count() < width {
            out.push_str(CLEAR_LINE);
        }
        out.push('\n');
    }
    out.push_str(CLEAR_BELOW);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_in_place_go_home_clear_short_lines_and_keep_to_the_rows() {
        let lines: Vec<String> = ["abc", "abcd", "x", "y"].map(String::from).into();
        let first = in_place(&lines, 4, 3, true);
        assert_eq!(
            first, "\x1b[?25l\x1b[2J\x1b[Habc\x1b[K\nabcd\nx\x1b[K\n\x1b[J",
            "the full line is not cleared, the fourth row is left out"
        );
        assert!(in_place(&lines, 4, 3, false).starts_with("\x1b[Habc"));
    }

    #[test]
    fn plain_frames_have_no_escapes_and_a_blank_line_between() {
        let lines: Vec<String> = ["a", "b"].map(String::from).into();
        assert_eq!(plain(&lines, false), "a\nb\n");
        assert_eq!(plain(&lines, true), "\na\nb\n");
    }

    #[test]
    fn columns_and_lines_are_taken_when_they_are_sizes() {
        let env: HashMap<String, String> = [("COLUMNS", "120"), ("LINES", "0")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into();
        assert_eq!(
            SizeOverride::from_env(&env),
            SizeOverride {
                columns: Some(120),
                lines: None
            }
        );
    }
}
