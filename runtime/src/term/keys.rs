//! Telling a person's key from a terminal's reply, for the approval prompts.
//!
//! A command that shares the terminal can write a query (`ESC[>q`, `ESC[?2004$p`, ENQ …)
//! that the terminal answers by "typing" a reply into the input; replies contain letters
//! (`ESC P>|tmux 3.3a ESC\`, `ESC[?2004;2$y`, `PuTTY`) that would otherwise read as
//! answers. So an answer counts only when it is a chunk of input that holds exactly one key
//! outside any escape sequence, and arrives after a short grace period once the question is
//! shown (a reply to a query written just before it may still be on its way; nobody reads a
//! question and answers it that fast).

use std::time::{Duration, Instant};

/// Written before a question: whatever the command left the terminal in, the question shows
/// as plain text. CAN then ST end an escape sequence or string in progress (an unterminated
/// OSC title would swallow the question), then attributes off (hidden or same-colour text),
/// the ASCII character set, the cursor shown; the default foreground, background and cursor
/// colours and the palette restored (OSC 110/111/112/104: red-team round 23 set text and
/// background both to black, so the real question was invisible beside a fake one), insert
/// mode off, autowrap on, reverse screen off, synchronized output ended (a terminal holding
/// the screen until the command's "end of update" would never show the question).
pub const RESET: &str = concat!(
    "\x18\x1b\\",
    "\x1b[0m\x1b(B\x0f\x1b[?25h",
    "\x1b]110\x1b\\\x1b]111\x1b\\\x1b]112\x1b\\\x1b]104\x1b\\",
    "\x1b[4l\x1b[?7h\x1b[?5l\x1b[?2026l",
);

/// Input in the first moments after the question is shown is never an answer.
pub const GRACE: Duration = Duration::from_millis(250);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Ground,
    /// After ESC.
    Esc,
    /// A control sequence (ESC [ or CSI): until a final byte 0x40–0x7E.
    Csi,
    /// After ESC O: one more byte.
    Ss3,
    /// A string (DCS, OSC, APC, PM, SOS): until ST (ESC \ or 0x9C) or, for OSC, BEL.
    Str,
    /// ESC inside a string.
    StrEsc,
}

/// Filters one question's input; see the module documentation.
#[derive(Debug)]
pub struct KeyFilter {
    state: State,
    shown: Instant,
    grace: Duration,
}

impl Default for KeyFilter {
    fn default() -> Self {
        KeyFilter::new()
    }
}

impl KeyFilter {
    /// For a question shown now.
    pub fn new() -> KeyFilter {
        KeyFilter::with_grace(GRACE)
    }

    pub fn with_grace(grace: Duration) -> KeyFilter {
        KeyFilter {
            state: State::Ground,
            shown: Instant::now(),
            grace,
        }
    }

    /// The key `chunk` (one read's worth of input) is, if it is one key: `None` for bytes
    /// inside escape sequences, for a chunk with more than one key, and during the grace.
    pub fn key(&mut self, chunk: &[u8]) -> Option<u8> {
        let mut keys = Vec::new();
        for &b in chunk {
            self.state = match (self.state, b) {
                (State::Ground, 0x1b) => State::Esc,
                (State::Ground, 0x9b) => State::Csi,
                (State::Ground, 0x90 | 0x9d | 0x9e | 0x9f | 0x98) => State::Str,
                (State::Ground, _) => {
                    keys.push(b);
                    State::Ground
                }
                (State::Esc, b'[') => State::Csi,
                (State::Esc, b'P' | b']' | b'_' | b'^' | b'X') => State::Str,
                (State::Esc, b'O') => State::Ss3,
                (State::Esc, 0x1b) => State::Esc,
                (State::Esc, _) => State::Ground,
                (State::Csi, 0x40..=0x7e) => State::Ground,
                (State::Csi, 0x1b) => State::Esc,
                (State::Csi, _) => State::Csi,
                (State::Ss3, _) => State::Ground,
                (State::Str, 0x1b) => State::StrEsc,
                (State::Str, 0x07 | 0x9c) => State::Ground,
                (State::Str, _) => State::Str,
                (State::StrEsc, b'\\') => State::Ground,
                (State::StrEsc, 0x1b) => State::StrEsc,
                (State::StrEsc, _) => State::Str,
            };
        }
        if self.shown.elapsed() < self.grace {
            return None;
        }
        match keys.as_slice() {
            [k] => Some(*k),
            _ => None,
        }
    }
}

#[cfg(test)]
#[path = "keys_tests.rs"]
mod tests;
